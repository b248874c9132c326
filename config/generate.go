package config

//go:generate go run ./gendoc ../docs/configuration.md
