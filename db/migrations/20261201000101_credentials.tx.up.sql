-- Credential lifecycle: tokens may expire, and failed sign-ins are counted in the database so
-- that every server process sharing it refuses the same guesser.
ALTER TABLE api_tokens ADD COLUMN expires_at TIMESTAMPTZ NULL;

CREATE TABLE login_failures (
    id       BIGSERIAL PRIMARY KEY,
    username TEXT NOT NULL,
    address  TEXT NOT NULL,
    at       TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
-- The limiter asks for the newest failures of one name and of one address inside the window.
CREATE INDEX idx_login_failures_username ON login_failures (username, at DESC);
CREATE INDEX idx_login_failures_address ON login_failures (address, at DESC);
-- Pruning deletes by age.
CREATE INDEX idx_login_failures_at ON login_failures (at);
