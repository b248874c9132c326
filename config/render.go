package config

import (
	"fmt"
	"strings"
)

// Markdown renders the table as docs/configuration.md.
func Markdown() string {
	var sb strings.Builder
	sb.WriteString("# Configuration\n\n")
	sb.WriteString("<!-- Generated from config/vars.go by `make docs`; edit the table there, not this file. -->\n\n")
	sb.WriteString("Every setting is an environment variable; `asterion help env` prints this list. " +
		"A malformed duration, number, address or list stops the command at start with a one-line error naming its variable.\n")
	for _, g := range Groups {
		fmt.Fprintf(&sb, "\n## %s\n\n", g.Title)
		if g.Intro != "" {
			sb.WriteString(g.Intro + "\n\n")
		}
		sb.WriteString("| variable | default | what it sets |\n|---|---|---|\n")
		for _, v := range g.Vars {
			fmt.Fprintf(&sb, "| `%s` | %s | %s |\n", v.Name, cell(v.Default), cell(v.Meaning))
		}
	}
	return sb.String()
}

// cell keeps a text inside one table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Text renders the table for a terminal, as `asterion help env` prints it.
func Text() string {
	var sb strings.Builder
	for i, g := range Groups {
		if i > 0 {
			sb.WriteString("\n")
		}
		sb.WriteString(g.Title + "\n")
		if g.Intro != "" {
			wrap(&sb, plain(g.Intro), "  ")
		}
		for _, v := range g.Vars {
			sb.WriteString("  " + v.Name + "\n")
			wrap(&sb, plain(v.Meaning), "      ")
			wrap(&sb, "default: "+plain(v.Default), "      ")
		}
	}
	return sb.String()
}

// plain drops the Markdown code marks.
func plain(s string) string { return strings.ReplaceAll(s, "`", "") }

// wrap writes s in lines of at most about 100 columns, each starting with indent.
func wrap(sb *strings.Builder, s, indent string) {
	line := indent
	for _, w := range strings.Fields(s) {
		if len(line) > len(indent) && len(line)+1+len(w) > 100 {
			sb.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	if len(line) > len(indent) {
		sb.WriteString(line + "\n")
	}
}
