-- Webhook secrets are stored sealed with the server's secret key (AES-256-GCM, "sealed:v1:…"),
-- which the database never sees, so a migration cannot seal the plain-text secrets stored
-- before. They are removed instead: they are secrets at rest in the clear, and they could not
-- sign the new Standard Webhooks deliveries anyway (those need a whsec_ secret and receivers that
-- verify the new headers). Such an org keeps its URL; its deliveries fail as unsigned
-- ("webhook_unsigned") until `asterion org set-webhook` gives it a new secret.
UPDATE orgs SET webhook_secret = NULL
WHERE webhook_secret IS NOT NULL AND webhook_secret NOT LIKE 'sealed:v1:%';
