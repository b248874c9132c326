package handlers

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"asterion/identity"
)

// TestFrontDoorBatchOnTheDashboard: a batch's jobs carry the batch badge in the jobs list, a
// chat completion's carry the front door's, the health page counts both by door, and the
// batch's operation page shows its progress by request counts.
func TestFrontDoorBatchOnTheDashboard(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	op := f.user(t, "fbd-a", "fbd-operator", identity.RoleOperator)
	client := f.sdkClient(op.Tok)
	ctx := context.Background()
	if _, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello #sim:tokens=2")}}); err != nil {
		t.Fatalf("chat: %v", err)
	}
	in := uploadBatchFile(t, client, chatLine("a", "one #sim:tokens=2")+"\n"+chatLine("b", "two #sim:tokens=2")+"\nnot json\n")
	b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	awaitBatch(t, client, b.ID, sdk.BatchStatusCompleted)

	list := f.do(t, "GET", "/admin/jobs/list", op.Tok, nil)
	if list.StatusCode != http.StatusOK {
		t.Fatalf("jobs list: %s", list)
	}
	if n := strings.Count(string(list.Body), `data-door="batch"`); n != 2 {
		t.Errorf("%d jobs with the batch badge, want 2", n)
	}
	if n := strings.Count(string(list.Body), `data-door="front_door"`); n != 1 {
		t.Errorf("%d jobs with the front door's badge, want 1", n)
	}

	health := string(f.do(t, "GET", "/admin/health/panel", op.Tok, nil).Body)
	for _, want := range []string{`<tr data-door="batch">`, `<tr data-door="front_door">`} {
		i := strings.Index(health, want)
		if i < 0 {
			t.Fatalf("health panel has no %s row", want)
		}
		row := health[i:]
		row = row[:strings.Index(row, "</tr>")]
		wantN := ">2<"
		if strings.Contains(want, "front_door") {
			wantN = ">1<"
		}
		if !strings.Contains(row[strings.Index(row, "data-door-window"):], wantN) {
			t.Errorf("health row %s, want %s created", row, wantN)
		}
	}

	var opID string
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT operation_id FROM sa_batch WHERE id = ?", b.ID).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	page := string(f.do(t, "GET", "/admin/deferred-operations/"+opID, op.Tok, nil).Body)
	if !strings.Contains(page, `data-batch="`+b.ID+`"`) || !strings.Contains(page, "2 answered, 1 failed of 3 requests") {
		t.Errorf("the batch's operation page shows no progress by request counts")
	}
}
