package readmodel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"asterion/jobs"
)

// PromptMessages returns the conversation of a prompt submitted as messages, nil for one
// submitted as text. The caller has already checked that the prompt's job is visible.
func (s *Reads) PromptMessages(ctx context.Context, promptID uuid.UUID) ([]jobs.Message, error) {
	var raw *string
	if err := s.db.NewSelect().Table("sa_entity").ColumnExpr("messages::text").Where("id = ?", promptID).
		Scan(ctx, &raw); err != nil {
		return nil, fmt.Errorf("read messages of prompt %s: %w", promptID, err)
	}
	if raw == nil {
		return nil, nil
	}
	return jobs.PromptMessages(json.RawMessage(*raw))
}
