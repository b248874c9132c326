-- The PL/pgSQL and SQL functions live in db/functions, one file per function, applied after the
-- migrations by the migrator; this table records the hash of each file's text as last applied,
-- so a migration applies only the files that changed since.
CREATE TABLE asterion_function (
    name       TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
