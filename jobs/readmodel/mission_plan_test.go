package readmodel

import (
	"context"
	"strings"
	"testing"

	"asterion/db/dbtest"
)

// The mission views find a user's newest prompts through idx_entity_prompts, newest first, and
// never read sa_entity whole: the field's statement as it runs, and the versions' statement on
// the custom and the generic plan of its prepared form, before and after the planner has
// statistics, among many entities of other users and of the other kind.
func TestMissionReadsWalkThePromptsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, analyzed := range []bool{false, true} {
		d := dbtest.New(t)
		if _, err := d.Bun.ExecContext(ctx, `INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class,
			org_id, created_by, created_at)
			SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN 'prompt' ELSE 'response' END, 'text', gen_random_uuid(),
				'observed', 'final', 1 + g % 3, 1 + g % 50, now() - g * interval '1 second'
			FROM generate_series(1, 20000) AS g`); err != nil {
			t.Fatal(err)
		}
		if analyzed {
			if _, err := d.Bun.ExecContext(ctx, "ANALYZE sa_entity"); err != nil {
				t.Fatal(err)
			}
		}
		conn, err := d.Bun.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plans := map[string][]string{}
		var field []string
		if err := conn.NewRaw("EXPLAIN "+missionFieldSQL, 2, 7, MissionTextCap, false, nil, 100, nil).Scan(ctx, &field); err != nil {
			t.Fatal(err)
		}
		plans["field"] = field
		if _, err := conn.ExecContext(ctx, "PREPARE mission_versions(bigint, bigint, int) AS "+missionVersionsSQL); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			var lines []string
			if err := conn.NewRaw("EXPLAIN EXECUTE mission_versions(2, 7, 100)").Scan(ctx, &lines); err != nil {
				t.Fatal(err)
			}
			plans["versions, "+mode] = lines
		}
		_ = conn.Close()
		for name, lines := range plans {
			whole := strings.Join(lines, "\n")
			if !strings.Contains(whole, "idx_entity_prompts") || strings.Contains(whole, "Seq Scan on sa_entity") {
				t.Errorf("analyzed %v, %s: the plan does not walk idx_entity_prompts:\n%s", analyzed, name, whole)
			}
		}
	}
}
