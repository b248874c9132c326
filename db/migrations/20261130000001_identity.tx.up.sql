-- Identity: orgs, users, API tokens and browser sessions.
CREATE TABLE orgs (
    id             BIGSERIAL PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE CHECK (name <> ''),
    webhook_url    TEXT NULL,
    webhook_secret TEXT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    org_id        BIGINT NOT NULL REFERENCES orgs (id),
    name          TEXT NOT NULL UNIQUE CHECK (name <> ''),
    role          TEXT NOT NULL CHECK (role IN ('member', 'operator', 'admin')),
    password_hash TEXT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    disabled_at   TIMESTAMPTZ NULL
);
CREATE INDEX idx_users_org ON users (org_id);

CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id),
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ NULL,
    revoked_at   TIMESTAMPTZ NULL
);
CREATE INDEX idx_api_tokens_user ON api_tokens (user_id);

CREATE TABLE sessions (
    id_hash      TEXT PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id),
    csrf_token   TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_sessions_user ON sessions (user_id);
CREATE INDEX idx_sessions_expires ON sessions (expires_at);

-- Keeps updated_at current on every UPDATE, the PostgreSQL form of ON UPDATE CURRENT_TIMESTAMP.
CREATE FUNCTION asterion_touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
