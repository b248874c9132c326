package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/provider"
)

// TestFrontDoorGetModel: through the SDK, a model of the deployment is the same object as its
// entry of the list, an id with a slash or colons included; an unknown model is OpenAI's 404
// model_not_found, whether its id holds a slash escaped (as the SDK sends it) or not, and never
// the catch-all's "Invalid URL".
func TestFrontDoorGetModel(t *testing.T) {
	cfg := frontDoorConfig(t)
	withUsage := cfg.Jobs
	cfg.Jobs = func(jc *jobs.Config) {
		withUsage(jc)
		jc.Models = []string{provider.SimModel, "meta-llama/Llama-3-8B", "ft:gpt-4o:org:x"}
	}
	f := startLiveServerWith(t, cfg)
	u := f.user(t, "fdm-a", "fdm-member", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()

	page, err := client.Models.List(ctx)
	if err != nil || len(page.Data) != 3 {
		t.Fatalf("models: %v %+v", err, page)
	}
	for _, listed := range page.Data {
		got, err := client.Models.Get(ctx, listed.ID)
		if err != nil {
			t.Fatalf("get model %s: %v", listed.ID, err)
		}
		var want, have map[string]any
		if err := json.Unmarshal([]byte(listed.RawJSON()), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(got.RawJSON()), &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("model %s is %s, its entry of the list %s", listed.ID, got.RawJSON(), listed.RawJSON())
		}
	}

	notFound := func(what, model string, err error) {
		t.Helper()
		apierr := asAPIError(t, what, err, http.StatusNotFound)
		if apierr.Code != "model_not_found" || apierr.Param != "model" || !strings.Contains(apierr.Message, "`"+model+"`") {
			t.Errorf("%s: %s, want model_not_found naming %s", what, apierr.RawJSON(), model)
		}
	}
	for _, model := range []string{"gpt-nope", "meta-llama/Not-Here", "ft:gpt-4o:org:other"} {
		_, err := client.Models.Get(ctx, model)
		notFound("get model "+model, model, err)
	}

	// An SDK that does not escape the slash sends the id as two segments: the same answers.
	// raw asks as the member, or as tok[0] ("" for anonymous).
	raw := func(path string, tok ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.Base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		bearer := u.Tok
		if len(tok) > 0 {
			bearer = tok[0]
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	status, body := raw("/v1/models/meta-llama/Llama-3-8B")
	if status != http.StatusOK || !strings.Contains(body, `"id":"meta-llama/Llama-3-8B"`) {
		t.Errorf("unescaped slash of an admitted model: %d %s", status, body)
	}
	status, body = raw("/v1/models/meta-llama/Not-Here")
	if status != http.StatusNotFound || !strings.Contains(body, `"code":"model_not_found"`) || strings.Contains(body, "Invalid URL") {
		t.Errorf("unescaped slash of an unknown model: %d %s, want model_not_found", status, body)
	}

	// The route is a member's, as the list is: anonymous is refused, an operator answered.
	if status, body := raw("/v1/models/"+provider.SimModel, ""); status != http.StatusUnauthorized {
		t.Errorf("anonymous: %d %s, want 401", status, body)
	}
	operator := f.user(t, "fdm-a", "fdm-operator", identity.RoleOperator)
	if status, body := raw("/v1/models/"+provider.SimModel, operator.Tok); status != http.StatusOK {
		t.Errorf("an operator: %d %s, want 200", status, body)
	}
}

// TestFrontDoorListFiles: GET /v1/files through the SDK lists what GET /v1/files/{id} finds: a
// member its own uploads and its batch's output and error files, not another member's; an
// operator of the org both members'; a member of another org none of them. Pages of Limit
// follow After in either order, the SDK's auto-pager walks them all, purpose filters, and a bad
// parameter is a 400 naming it.
func TestFrontDoorListFiles(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	member := f.user(t, "fdl-a", "fdl-member", identity.RoleMember)
	peer := f.user(t, "fdl-a", "fdl-peer", identity.RoleMember)
	operator := f.user(t, "fdl-a", "fdl-operator", identity.RoleOperator)
	stranger := f.user(t, "fdl-b", "fdl-stranger", identity.RoleMember)
	client := f.sdkClient(member.Tok)
	ctx := context.Background()

	// The member's batch: one good line and one broken, so it writes an output and an error file.
	in := uploadBatchFile(t, client, chatLine("ok", "listed #sim:tokens=3")+"\n"+`{"custom_id": "broken", "method": `+"\n")
	b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	done := awaitBatch(t, client, b.ID, sdk.BatchStatusCompleted)
	if done.OutputFileID == "" || done.ErrorFileID == "" {
		t.Fatalf("batch %s, want an output and an error file", done.RawJSON())
	}
	// The output and error files are written in one transaction, so at one instant: between
	// them the order is their ids'.
	written := []string{done.OutputFileID, done.ErrorFileID}
	slices.Sort(written)
	mine := append([]string{in.ID}, written...) // oldest first
	for range 3 {
		mine = append(mine, uploadBatchFile(t, client, chatLine("m", "mine")).ID)
	}
	peers := uploadBatchFile(t, f.sdkClient(peer.Tok), chatLine("p", "the peer's")).ID
	strangers := uploadBatchFile(t, f.sdkClient(stranger.Tok), chatLine("s", "the stranger's")).ID

	ids := func(files []sdk.FileObject) []string {
		out := make([]string, len(files))
		for i, fo := range files {
			out[i] = fo.ID
		}
		return out
	}
	list := func(c sdk.Client, q sdk.FileListParams) []string {
		t.Helper()
		var out []string
		iter := c.Files.ListAutoPaging(ctx, q)
		for iter.Next() {
			out = append(out, iter.Current().ID)
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		return out
	}
	newestFirst := slices.Clone(mine)
	slices.Reverse(newestFirst)
	if got := list(client, sdk.FileListParams{}); !slices.Equal(got, newestFirst) {
		t.Errorf("the member's files: %v, want %v", got, newestFirst)
	}
	outputs := list(client, sdk.FileListParams{Purpose: sdk.String("batch_output")})
	if got := outputs; !slices.Equal(got, []string{written[1], written[0]}) {
		t.Errorf("the member's batch_output files: %v, want the batch's output and error files", got)
	}
	orgs := append(slices.Clone(mine), peers)
	if got := list(f.sdkClient(operator.Tok), sdk.FileListParams{Order: sdk.FileListParamsOrderAsc}); !slices.Equal(got, orgs) {
		t.Errorf("the operator's files: %v, want the member's and the peer's", got)
	}
	if got := list(f.sdkClient(peer.Tok), sdk.FileListParams{}); !slices.Equal(got, []string{peers}) {
		t.Errorf("the peer's files: %v, want its own only", got)
	}
	if got := list(f.sdkClient(stranger.Tok), sdk.FileListParams{}); !slices.Equal(got, []string{strangers}) {
		t.Errorf("the other org's member's files: %v, want its own only", got)
	}

	// Pages of two, by hand and by the auto-pager, in both orders: every file once, in order.
	for _, order := range []sdk.FileListParamsOrder{sdk.FileListParamsOrderAsc, sdk.FileListParamsOrderDesc} {
		want := newestFirst
		if order == sdk.FileListParamsOrderAsc {
			want = mine
		}
		first, err := client.Files.List(ctx, sdk.FileListParams{Order: order, Limit: sdk.Int(2)})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Data) != 2 || !first.HasMore {
			t.Fatalf("%s, first page of 2: %s", order, first.RawJSON())
		}
		var top struct {
			Object  string `json:"object"`
			FirstID string `json:"first_id"`
			LastID  string `json:"last_id"`
		}
		if err := json.Unmarshal([]byte(first.RawJSON()), &top); err != nil || top.Object != "list" ||
			top.FirstID != first.Data[0].ID || top.LastID != first.Data[1].ID {
			t.Errorf("%s, first page: %s, want a list with first_id and last_id", order, first.RawJSON())
		}
		got := ids(first.Data)
		for page := first; ; {
			next, err := page.GetNextPage()
			if err != nil {
				t.Fatalf("%s, next page: %v", order, err)
			}
			if next == nil {
				break
			}
			got, page = append(got, ids(next.Data)...), next
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s by pages of 2: %v, want %v", order, got, want)
		}
		if paged := list(client, sdk.FileListParams{Order: order, Limit: sdk.Int(2)}); !slices.Equal(paged, got) {
			t.Errorf("%s, auto-paging by 2: %v, want %v", order, paged, got)
		}
		after, err := client.Files.List(ctx, sdk.FileListParams{Order: order, After: sdk.String(got[2]), Limit: sdk.Int(10)})
		if err != nil || after.HasMore || !slices.Equal(ids(after.Data), got[3:]) {
			t.Errorf("%s after %s: %v %v, want %v", order, got[2], err, ids(after.Data), got[3:])
		}
	}

	for _, c := range []struct {
		q     sdk.FileListParams
		param string
	}{
		{sdk.FileListParams{Limit: sdk.Int(0)}, "limit"},
		{sdk.FileListParams{Limit: sdk.Int(10001)}, "limit"},
		{sdk.FileListParams{Order: "newest"}, "order"},
		{sdk.FileListParams{After: sdk.String("file-nope")}, "after"},
		{sdk.FileListParams{After: sdk.String(peers)}, "after"},
		{sdk.FileListParams{After: sdk.String(strangers)}, "after"},
	} {
		_, err := client.Files.List(ctx, c.q)
		apierr := asAPIError(t, "list with a bad "+c.param, err, http.StatusBadRequest)
		if apierr.Param != c.param || apierr.Code != "invalid_value" || apierr.Type != "invalid_request_error" {
			t.Errorf("bad %s: %s, want invalid_value naming it", c.param, apierr.RawJSON())
		}
	}
	// A limit that is no integer, which the SDK cannot send.
	resp := f.do(t, http.MethodGet, "/v1/files?limit=many", member.Tok, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(resp.Body), `"param":"limit"`) {
		t.Errorf("limit=many: %s", resp)
	}
}
