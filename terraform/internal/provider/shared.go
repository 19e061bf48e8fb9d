package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// withClient gives a resource the configured client; embed it and call r.client.
type withClient struct {
	client *inlet.Client
}

func (w *withClient) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	w.client = configuredClient(req.ProviderData, &resp.Diagnostics)
}

// withDataClient is withClient for data sources.
type withDataClient struct {
	client *inlet.Client
}

func (w *withDataClient) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	w.client = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func configuredClient(data any, diags *diag.Diagnostics) *inlet.Client {
	if data == nil { // validation and plans before the provider is configured
		return nil
	}
	client, ok := data.(*inlet.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("Expected *inlet.Client, got %T.", data))
	}
	return client
}

// reportAPIError adds an API failure as an error whose summary says what was being done.
func reportAPIError(diags *diag.Diagnostics, action string, err error) {
	if apiErr, ok := err.(*inlet.Error); ok {
		diags.AddError(action+": "+apiErr.Title, apiErr.Detail)
		return
	}
	diags.AddError(action, err.Error())
}

// notFound is the error of an import or a lookup whose object Inlet does not have for this tenant.
func notFound(diags *diag.Diagnostics, kind, id string) {
	diags.AddError("No "+kind+" "+id, "Inlet has no "+kind+" with this id for the provider's API key's tenant.")
}

// findByIDOrName is one object's body by id, or by exact name (the list endpoints filter by it).
func findByIDOrName(ctx context.Context, client *inlet.Client, kind, collection string, id, name types.String,
	diags *diag.Diagnostics) ([]byte, bool) {
	if id.IsNull() == name.IsNull() {
		diags.AddError("Give the "+kind+"'s id or its name", "One of them, not both.")
		return nil, false
	}
	if !id.IsNull() {
		answer, err := client.Find(ctx, collection+"/"+id.ValueString())
		if err != nil {
			reportAPIError(diags, "Reading the "+kind, err)
			return nil, false
		}
		if answer == nil {
			notFound(diags, kind, id.ValueString())
			return nil, false
		}
		return answer.Body, true
	}
	answer, err := client.Get(ctx, collection, url.Values{"name": {name.ValueString()}, "limit": {"2"}})
	if err != nil {
		reportAPIError(diags, "Reading the "+kind, err)
		return nil, false
	}
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := answer.Decode(&page); err != nil {
		reportAPIError(diags, "Reading the "+kind, err)
		return nil, false
	}
	if len(page.Items) != 1 {
		diags.AddError("No "+kind+" named "+name.String(), "The API key's tenant has no "+kind+" with this name.")
		return nil, false
	}
	return page.Items[0], true
}
