package identity

// The statements that answer whether a session cookie or a bearer token is still valid, run on
// every request through database/sql with a parameter, so the connection keeps them prepared.
const (
	// sessionPrincipalSQL finds the principal and CSRF token of a live session: not expired, its
	// user not disabled.
	sessionPrincipalSQL = `SELECT u.id, u.name, u.role, o.id, o.name, s.csrf_token
	FROM sessions s JOIN users u ON u.id = s.user_id JOIN orgs o ON o.id = u.org_id
	WHERE s.id_hash = $1 AND s.expires_at > now() AND u.disabled_at IS NULL`

	// purgeSessionsSQL deletes the expired sessions.
	purgeSessionsSQL = `DELETE FROM sessions WHERE expires_at <= now()`

	// tokenAuthSQL finds the principal of a live token: not revoked, not expired, its user not
	// disabled. stale says whether last_used_at is older than the current minute.
	tokenAuthSQL = `SELECT u.id, u.name, u.role, o.id, o.name,
			t.last_used_at IS NULL OR t.last_used_at < date_trunc('minute', now())
		FROM api_tokens t JOIN users u ON u.id = t.user_id JOIN orgs o ON o.id = u.org_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
			AND u.disabled_at IS NULL`

	// tokenUsedSQL records a token's use to the minute. It is conditional, so that concurrent
	// requests in the same minute write once between them, and it skips a row another request
	// is writing: the requests of a busy token that all find it stale at the turn of a minute do
	// not queue behind that one write's commit (a skipped use is the same minute's use the
	// writer records).
	tokenUsedSQL = `UPDATE api_tokens SET last_used_at = date_trunc('minute', now())
	WHERE id = (SELECT id FROM api_tokens WHERE token_hash = $1
		AND (last_used_at IS NULL OR last_used_at < date_trunc('minute', now())) FOR UPDATE SKIP LOCKED)`
)
