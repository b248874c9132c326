package db

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/uptrace/bun/schema"
)

// insertParams renders the INSERT bun would write for model (a pointer to a bun model struct)
// with ? placeholders in place of the values, and returns the values in order. Columns bun
// would write as DEFAULT (a nil pointer, a zero nullzero field, a zero field with a default)
// are left out, so the database fills them the same way; the text therefore depends only on
// which columns are present, and a handful of texts cover every row of a table.
func insertParams(tables *schema.Tables, model any) (string, []any, error) {
	strct, table, err := modelTable(tables, model)
	if err != nil {
		return "", nil, fmt.Errorf("insert params: %w", err)
	}
	var q strings.Builder
	q.WriteString("INSERT INTO ")
	q.WriteString(string(table.SQLName))
	q.WriteString(" (")
	args := make([]any, 0, len(table.Fields))
	for _, f := range table.Fields {
		if marshalsToDefault(f, strct) {
			continue
		}
		arg, err := paramOf(f, f.Value(strct))
		if err != nil {
			return "", nil, fmt.Errorf("insert params of %s.%s: %w", table.Name, f.Name, err)
		}
		if len(args) > 0 {
			q.WriteString(", ")
		}
		q.WriteString(string(f.SQLName))
		args = append(args, arg)
	}
	q.WriteString(") VALUES (")
	for i := range args {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteByte('?')
	}
	q.WriteByte(')')
	return q.String(), args, nil
}

// modelTable is the struct a model points to and its bun table.
func modelTable(tables *schema.Tables, model any) (reflect.Value, *schema.Table, error) {
	v := reflect.ValueOf(model)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, nil, fmt.Errorf("want a pointer to a struct, got %T", model)
	}
	return v.Elem(), tables.Get(v.Elem().Type()), nil
}

// marshalsToDefault is bun's rule for a column it writes as DEFAULT.
func marshalsToDefault(f *schema.Field, strct reflect.Value) bool {
	return (f.IsPtr && f.HasNilValue(strct)) || (f.HasZeroValue(strct) && (f.NullZero || f.SQLDefault != ""))
}

var valuerType = reflect.TypeFor[driver.Valuer]()

// paramOf turns a field's value into an argument pgdriver sends as text: JSON columns as their
// text (bytes would travel as bytea), valuers (UUIDs) through Value, the rest as plain values.
func paramOf(f *schema.Field, fv reflect.Value) (any, error) {
	if fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			return nil, nil
		}
		fv = fv.Elem()
	}
	if t := strings.ToLower(f.UserSQLType); t == "jsonb" || t == "json" {
		if fv.Type().Implements(valuerType) {
			return fv.Interface().(driver.Valuer).Value()
		}
		if raw, ok := fv.Interface().(json.RawMessage); ok {
			if raw == nil { // bun writes a nil message as JSON null
				return "null", nil
			}
			return string(raw), nil
		}
		b, err := json.Marshal(fv.Interface())
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	if fv.Type().Implements(valuerType) {
		return fv.Interface().(driver.Valuer).Value()
	}
	switch fv.Kind() {
	case reflect.String:
		return fv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fv.Int(), nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return int64(fv.Uint()), nil
	case reflect.Bool:
		return fv.Bool(), nil
	case reflect.Float32, reflect.Float64:
		return fv.Float(), nil
	}
	if t, ok := fv.Interface().(time.Time); ok {
		if t.IsZero() { // pgdriver would send NULL; bun writes the zero instant
			return "0001-01-01 00:00:00+00", nil
		}
		return t, nil
	}
	if b, ok := fv.Interface().([]byte); ok {
		return b, nil
	}
	return nil, fmt.Errorf("no parameter form for %s", fv.Type())
}

// updateParams renders the UPDATE bun's Model(model).WherePK() would write — every column
// but the primary key (and skipupdate ones) set from the struct, the row picked by its primary
// key — with ? placeholders, and returns the values in order. A nil pointer or a zero nullzero
// field is set to DEFAULT, as bun writes it for PostgreSQL.
func updateParams(tables *schema.Tables, model any) (string, []any, error) {
	strct, table, err := modelTable(tables, model)
	if err != nil {
		return "", nil, fmt.Errorf("update params: %w", err)
	}
	if len(table.PKs) == 0 {
		return "", nil, fmt.Errorf("update params: %s has no primary key", table.Name)
	}
	var q strings.Builder
	q.WriteString("UPDATE ")
	q.WriteString(string(table.SQLName))
	q.WriteString(" SET ")
	args := make([]any, 0, len(table.Fields))
	set := 0
	for _, f := range table.DataFields {
		if f.SkipUpdate() {
			continue
		}
		if set > 0 {
			q.WriteString(", ")
		}
		set++
		q.WriteString(string(f.SQLName))
		if (f.IsPtr && f.HasNilValue(strct)) || (f.NullZero && f.HasZeroValue(strct)) {
			q.WriteString(" = DEFAULT")
			continue
		}
		arg, err := paramOf(f, f.Value(strct))
		if err != nil {
			return "", nil, fmt.Errorf("update params of %s.%s: %w", table.Name, f.Name, err)
		}
		q.WriteString(" = ?")
		args = append(args, arg)
	}
	q.WriteString(" WHERE ")
	for i, f := range table.PKs {
		arg, err := paramOf(f, f.Value(strct))
		if err != nil {
			return "", nil, fmt.Errorf("update params of %s.%s: %w", table.Name, f.Name, err)
		}
		if i > 0 {
			q.WriteString(" AND ")
		}
		q.WriteString(string(f.SQLName))
		q.WriteString(" = ?")
		args = append(args, arg)
	}
	return q.String(), args, nil
}
