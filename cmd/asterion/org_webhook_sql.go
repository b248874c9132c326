package main

// The command line's statements beyond bun's builder.
const (
	// setOrgWebhookSQL sets an org's webhook URL and its sealed secret (bun fills the ?).
	setOrgWebhookSQL = `UPDATE orgs SET webhook_url = ?, webhook_secret = ? WHERE id = ?`
)
