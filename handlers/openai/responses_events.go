package openai

import (
	"bufio"
	"encoding/json"
	"fmt"
)

// The numbering of a response's events is a function of its job's output alone, so that any
// process, at any time, gives every event the same sequence_number: 0 response.created, 1
// response.in_progress, 2 response.output_item.added, 3 response.content_part.added, 3+k the
// output_text.delta of the output chunk numbered k (chunks are numbered from 1 within an
// attempt), and after the n chunks of the attempt that ended the job 4+n output_text.done, 5+n
// content_part.done, 6+n output_item.done and 7+n the event that ends the stream.
const (
	SeqCreated    = 0
	SeqInProgress = 1
	SeqItemAdded  = 2
	SeqPartAdded  = 3
)

// SeqDelta is the number of the delta of output chunk chunkSeq.
func SeqDelta(chunkSeq int) int { return SeqPartAdded + chunkSeq }

// SeqTextDone is the number of output_text.done after n chunks; content_part.done,
// output_item.done and the last event follow it one by one.
func SeqTextDone(n int) int { return SeqPartAdded + n + 1 }

// ResponseEvent is one event of a streamed response. Which fields it has depends on its type.
type ResponseEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int         `json:"sequence_number"`
	Response       *Response   `json:"response,omitempty"`
	OutputIndex    *int        `json:"output_index,omitempty"`
	ItemID         string      `json:"item_id,omitempty"`
	ContentIndex   *int        `json:"content_index,omitempty"`
	Item           *OutputItem `json:"item,omitempty"`
	Part           *OutputText `json:"part,omitempty"`
	Delta          *string     `json:"delta,omitempty"`
	Text           *string     `json:"text,omitempty"`
	Logprobs       *[]struct{} `json:"logprobs,omitempty"`
}

// ResponseEvents makes the events of one response's stream.
type ResponseEvents struct {
	ResponseID string
}

var zero = 0

func noLogprobs() *[]struct{} { l := []struct{}{}; return &l }

// Created is response.created, with the response as it stands.
func (e ResponseEvents) Created(r Response) ResponseEvent {
	return ResponseEvent{Type: "response.created", SequenceNumber: SeqCreated, Response: &r}
}

// InProgress is response.in_progress.
func (e ResponseEvents) InProgress(r Response) ResponseEvent {
	return ResponseEvent{Type: "response.in_progress", SequenceNumber: SeqInProgress, Response: &r}
}

// ItemAdded opens the assistant's message.
func (e ResponseEvents) ItemAdded() ResponseEvent {
	item := OutputItem{ID: messageID(e.ResponseID), Type: "message", Status: StatusInProgress, Role: "assistant",
		Content: []OutputText{}}
	return ResponseEvent{Type: "response.output_item.added", SequenceNumber: SeqItemAdded, OutputIndex: &zero, Item: &item}
}

// PartAdded opens the message's output_text part.
func (e ResponseEvents) PartAdded() ResponseEvent {
	return ResponseEvent{Type: "response.content_part.added", SequenceNumber: SeqPartAdded, ItemID: messageID(e.ResponseID),
		OutputIndex: &zero, ContentIndex: &zero, Part: &OutputText{Type: "output_text", Annotations: []struct{}{}}}
}

// Delta is the text of output chunk chunkSeq.
func (e ResponseEvents) Delta(chunkSeq int, text string) ResponseEvent {
	return ResponseEvent{Type: "response.output_text.delta", SequenceNumber: SeqDelta(chunkSeq), ItemID: messageID(e.ResponseID),
		OutputIndex: &zero, ContentIndex: &zero, Delta: &text, Logprobs: noLogprobs()}
}

// Done are the four events that end a stream after n chunks of output whose text is text: the
// part's text, the part, the message (its status that of the response, "incomplete" for one
// that did not complete) and the event of the response's final status.
func (e ResponseEvents) Done(n int, text string, r Response) []ResponseEvent {
	seq := SeqTextDone(n)
	id := messageID(e.ResponseID)
	part := OutputText{Type: "output_text", Text: text, Annotations: []struct{}{}}
	item := outputMessage(e.ResponseID, r.Status, text)
	if r.Status != StatusCompleted {
		item.Status = StatusIncomplete
	}
	end := "response." + r.Status
	if r.Status != StatusCompleted && r.Status != StatusFailed && r.Status != StatusCancelled && r.Status != StatusIncomplete {
		end = "response.failed"
	}
	return []ResponseEvent{
		{Type: "response.output_text.done", SequenceNumber: seq, ItemID: id, OutputIndex: &zero, ContentIndex: &zero, Text: &text,
			Logprobs: noLogprobs()},
		{Type: "response.content_part.done", SequenceNumber: seq + 1, ItemID: id, OutputIndex: &zero, ContentIndex: &zero, Part: &part},
		{Type: "response.output_item.done", SequenceNumber: seq + 2, OutputIndex: &zero, Item: &item},
		{Type: end, SequenceNumber: seq + 3, Response: &r},
	}
}

// StreamError is the error event that ends a stream which cannot go on, numbered seq.
type StreamError struct {
	Type           string  `json:"type"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber int     `json:"sequence_number"`
}

// WriteResponseEvent writes ev as OpenAI frames a response event: "event: " and its type,
// "data: " and the JSON on one line, and a blank line.
func WriteResponseEvent(w *bufio.Writer, ev ResponseEvent) error {
	return writeNamed(w, ev.Type, ev)
}

// WriteStreamError writes an error event.
func WriteStreamError(w *bufio.Writer, e StreamError) error {
	e.Type = "error"
	return writeNamed(w, e.Type, e)
}

func writeNamed(w *bufio.Writer, typ string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", typ, err)
	}
	w.WriteString("event: ")
	w.WriteString(typ)
	w.WriteString("\ndata: ")
	w.Write(b)
	_, err = w.WriteString("\n\n")
	return err
}
