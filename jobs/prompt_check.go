package jobs

import "fmt"

// PromptCheck is what the field rules of a submit say of a conversation and its execution
// options, for a door that queues its jobs itself (EnqueueTx) and must apply the same rules
// as Submit: the message and option problems by field, and the conversation's text (its last
// user message) with the field the text rules report on.
type PromptCheck struct {
	Fields    map[string]string
	Text      string
	TextField string
}

// CheckPrompt applies Submit's rules on messages and options (roles, lengths, the output
// bounds); the admission's rules on the text and the model are the door's to apply with Text.
func CheckPrompt(msgs []Message, o ExecutionOptions) PromptCheck {
	out := PromptCheck{Fields: map[string]string{}, TextField: "messages"}
	messageProblems(msgs, out.Fields)
	outputOptionProblems(o, out.Fields)
	if i := lastUser(msgs); i >= 0 {
		out.Text, out.TextField = msgs[i].Content, fmt.Sprintf("messages[%d].content", i)
	}
	return out
}

// ConversationText is the text of a conversation the provider reads, for the estimate of its
// tokens.
func ConversationText(msgs []Message) string { return conversationText(msgs) }
