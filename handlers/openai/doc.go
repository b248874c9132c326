// Package openai holds the wire shapes of Asterion's OpenAI-compatible front door: OpenAI's
// error object, a chat-completions request read into an Asterion submit, the chat.completion
// and chat.completion.chunk answers, the model list, and the exact framing of OpenAI's
// server-sent events. It is a package of its own so that the shapes an SDK relies on are
// written once and tested byte for byte, apart from the handlers that serve them; it holds no
// rule of Asterion's (those are the jobs package's) and does no I/O beyond writing a frame.
package openai
