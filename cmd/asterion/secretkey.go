package main

import (
	"fmt"
	"strconv"

	"asterion/secretbox"
)

const (
	// secretKeyEnv holds the server's secret key (base64 of 32 bytes), which secrets at rest
	// (the orgs' webhook secrets) are sealed with.
	secretKeyEnv = "ASTERION_SECRET_KEY"
	// secretKeyFile is where the key is generated on first use, under the working directory,
	// when secretKeyEnv is unset; the server and the CLI started in one directory share it.
	secretKeyFile = ".data/secret.key"
	// allowPrivateEnv lets webhooks go to loopback, private and link-local addresses.
	allowPrivateEnv = "ASTERION_WEBHOOK_ALLOW_PRIVATE"
)

// secretKeys is the source of the server's secret key. A configured key is checked now, so a
// malformed one stops the command at once; the key file is read or made only when first used.
func (c *cli) secretKeys() (*secretbox.Source, error) {
	text := c.getenv(secretKeyEnv)
	if text != "" {
		if _, err := secretbox.ParseKey(text); err != nil {
			return nil, fmt.Errorf("%s: want base64 of %d bytes (openssl rand -base64 %d)", secretKeyEnv, secretbox.KeySize, secretbox.KeySize)
		}
	}
	return secretbox.NewSource(text, secretKeyFile), nil
}

// webhookAllowPrivate reads allowPrivateEnv (default false).
func (c *cli) webhookAllowPrivate() (bool, error) {
	v := c.getenv(allowPrivateEnv)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false, got %q", allowPrivateEnv, v)
	}
	return b, nil
}
