package openai

import (
	"bufio"
	"encoding/json"
	"fmt"
)

// WriteEvent writes v as one server-sent event exactly as OpenAI frames them: "data: ", the
// JSON on one line (encoding/json never writes a raw line break), and a blank line.
func WriteEvent(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	w.WriteString("data: ")
	w.Write(b)
	_, err = w.WriteString("\n\n")
	return err
}

// WriteDone writes the event that ends a stream: "data: [DONE]".
func WriteDone(w *bufio.Writer) error {
	_, err := w.WriteString("data: [DONE]\n\n")
	return err
}

// WriteError writes an error object as an event of a stream already answered 200, as OpenAI
// does when a call fails after it began streaming; the SDKs raise it.
func WriteError(w *bufio.Writer, e *APIError) error {
	w.WriteString("data: ")
	w.Write(e.Body())
	_, err := w.WriteString("\n\n")
	return err
}
