package identity

// The statements of sign-in: the principal a sign-in opens a session for, the locks and counts
// of failed attempts that refuse a flood, and their purge. signInRefusalSQL keeps bun's
// numbered ?N placeholders: it runs through bun.IDB (the pool or the attempt's transaction),
// whose formatter fills them.
const (
	// principalByIDSQL and principalByNameSQL read a user's principal (scanPrincipal's columns).
	principalByIDSQL = `SELECT u.id, u.name, u.role, o.id, o.name FROM users u JOIN orgs o ON o.id = u.org_id
	WHERE u.id = $1`
	principalByNameSQL = `SELECT u.id, u.name, u.role, o.id, o.name FROM users u JOIN orgs o ON o.id = u.org_id
	WHERE u.name = $1`

	// signInRefusalSQL finds, for the name at the address, the address and the name, the failure
	// whose leaving the window ends a refusal: the limit-th newest inside the window (none when
	// under the limit). The pair is read through the name's index: the window holds at most the
	// per-name limit of its rows.
	signInRefusalSQL = `SELECT
		(SELECT at FROM login_failures WHERE username = ?0 AND address = ?1
			AND at > clock_timestamp() - ?2::bigint * interval '1 microsecond'
			ORDER BY at DESC OFFSET ?3 LIMIT 1),
		(SELECT at FROM login_failures WHERE address = ?1 AND at > clock_timestamp() - ?2::bigint * interval '1 microsecond'
			ORDER BY at DESC OFFSET ?4 LIMIT 1),
		(SELECT at FROM login_failures WHERE username = ?0 AND at > clock_timestamp() - ?2::bigint * interval '1 microsecond'
			ORDER BY at DESC OFFSET ?5 LIMIT 1),
		clock_timestamp()`

	// signInLockSQL takes the transaction's lock on one name or address ($2) in its lock class ($1).
	signInLockSQL = `SELECT pg_advisory_xact_lock($1, hashtext($2))`

	// signInFailureSQL counts an attempt as a failure in advance; signInReleaseSQL takes it back.
	signInFailureSQL = `INSERT INTO login_failures (username, address) VALUES ($1, $2) RETURNING id`
	signInReleaseSQL = `DELETE FROM login_failures WHERE id = $1`

	// purgeSignInFailuresSQL deletes the failures older than the window ($1 microseconds).
	purgeSignInFailuresSQL = `DELETE FROM login_failures WHERE at <= clock_timestamp() - $1::bigint * interval '1 microsecond'`
)
