package governor

// The governor's statements. The reservation and the observation call the functions of
// db/functions (asterion_governor_reserve, asterion_governor_observe) on database/sql, so the
// connection keeps them prepared, as it does the addition of calls; resumeSQL runs through bun's NewRaw in the caller's
// transaction (bun's ? placeholder).
const (
	// reserveSQL takes a slot (db/functions/asterion_governor_reserve.sql).
	reserveSQL = `SELECT granted, slot, now_at, paused, metered, counted FROM asterion_governor_reserve($1, $2, $3, $4, $5, $6, $7)`

	// addCallsSQL adds the calls a process granted by a read to the model's count.
	addCallsSQL = `UPDATE sa_governor SET calls = calls + $2 WHERE model = $1`

	// observeSQL records an observation (db/functions/asterion_governor_observe.sql; the last
	// argument bounds the pause and the token debt of one answer).
	observeSQL = `SELECT asterion_governor_observe($1, $2, $3, $4, $5, $6, $7, $8)`

	// heldSQL reads whether an operator's pause holds a model, and for how many more seconds
	// a provider's pause does (0 for none).
	heldSQL = `SELECT operator_paused, greatest(extract(epoch FROM paused_until - clock_timestamp()), 0)::float8 FROM sa_governor WHERE model = $1`

	// resumeSQL ends every pause of a model; a model never seen gets its row, unpaused.
	resumeSQL = `INSERT INTO sa_governor (model) VALUES (?)
ON CONFLICT (model) DO UPDATE SET operator_paused = false, paused_by = NULL, paused_role = NULL, paused_actor = NULL,
    paused_until = NULL, tok_tat = least(sa_governor.tok_tat, now()), updated_at = now()`
)
