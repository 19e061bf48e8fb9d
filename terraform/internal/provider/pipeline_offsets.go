package provider

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// inlet_pipeline_offsets: where a paused pipeline reads next, moved through the offsets API. It
// records one change (explicit offsets, a reset to earliest, latest or the starting offsets, or a
// move to a point in time) and applies it once, under If-Match, only while the pipeline is paused
// (Inlet answers 409 otherwise). Runs move the offsets forward afterwards: that is the pipeline
// working, not drift. Changing the resource applies the new change; destroying it leaves the
// offsets where they are.

var (
	_ resource.ResourceWithConfigure        = (*pipelineOffsetsResource)(nil)
	_ resource.ResourceWithIdentity         = (*pipelineOffsetsResource)(nil)
	_ resource.ResourceWithImportState      = (*pipelineOffsetsResource)(nil)
	_ resource.ResourceWithConfigValidators = (*pipelineOffsetsResource)(nil)
	_ resource.ResourceWithValidateConfig   = (*pipelineOffsetsResource)(nil)
)

// offsetsResets are the resets the resource takes; starting_offsets is the offsets API's DELETE.
var offsetsResets = []string{"earliest", "latest", "starting_offsets"}

// maxPartition is OffsetEntry's largest partition number.
const maxPartition = 1_000_000

func newPipelineOffsetsResource() resource.Resource { return &pipelineOffsetsResource{} }

type pipelineOffsetsResource struct{ withClient }

type pipelineOffsetsModel struct {
	ID          types.String `tfsdk:"id"`
	PipelineID  types.String `tfsdk:"pipeline_id"`
	Offsets     types.Map    `tfsdk:"offsets"`
	Reset       types.String `tfsdk:"reset"`
	ToTimestamp types.String `tfsdk:"to_timestamp"`
	Topics      types.List   `tfsdk:"topics"`
	ReplayMode  types.String `tfsdk:"replay_mode"`
	Clamp       types.Bool   `tfsdk:"clamp"`
	Committed   types.Map    `tfsdk:"committed"`
}

// offsetsChangeResult is OffsetsChangeResult: the rows a change moved.
type offsetsChangeResult struct {
	Rows []struct {
		Topic     string `json:"topic"`
		Partition int64  `json:"partition"`
		After     int64  `json:"after"`
	} `json:"rows"`
}

// offsetsRead is OffsetsRead: each partition's committed offset, watermarks and lag.
type offsetsRead struct {
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int64  `json:"partition"`
		Committed *int64 `json:"committed"`
		Earliest  *int64 `json:"earliest"`
		Latest    *int64 `json:"latest"`
		Lag       *int64 `json:"lag"`
	} `json:"partitions"`
	TotalLag *int64 `json:"total_lag"`
	Cluster  struct {
		Status string `json:"status"`
	} `json:"cluster"`
}

func offsetsPath(pipelineID string) string { return "/pipelines/" + pipelineID + "/offsets" }

func partitionKey(topic string, partition int64) string {
	return topic + ":" + strconv.FormatInt(partition, 10)
}

// splitPartitionKey reads "topic:partition"; ok is false for anything else.
func splitPartitionKey(key string) (topic string, partition int64, ok bool) {
	cut := strings.LastIndex(key, ":")
	if cut < 0 {
		return "", 0, false
	}
	topic, number := key[:cut], key[cut+1:]
	partition, err := strconv.ParseInt(number, 10, 64)
	if err != nil || number != strconv.FormatInt(partition, 10) || partition < 0 || partition > maxPartition ||
		!topicName.MatchString(topic) {
		return "", 0, false
	}
	return topic, partition, true
}

func (r *pipelineOffsetsResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pipeline_offsets"
}

func (r *pipelineOffsetsResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		// 1, as the Python provider 0.1 wrote its states: they read as they are.
		Version: 1,
		Description: "Moves a paused pipeline's offsets (a replay or a skip), once per change. Give exactly one of " +
			"offsets, reset or to_timestamp. Runs moving the offsets afterwards are not drift; destroying the " +
			"resource leaves the offsets where they are.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The pipeline's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"pipeline_id": schema.StringAttribute{
				Required: true, Description: "The paused inlet_pipeline whose offsets move.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"offsets": schema.MapAttribute{
				Optional: true, ElementType: types.Int64Type,
				Description: `The next offset to read per partition, keyed "topic:partition", e.g. { "orders:0" = 42 }.`,
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, 10000),
					mapvalidator.KeysAre(partitionKeyValidator{}),
					mapvalidator.ValueInt64sAre(int64validator.AtLeast(0)),
				},
			},
			"reset": schema.StringAttribute{
				Optional:    true,
				Description: "earliest, latest, or starting_offsets (the pipeline's own starting position, every partition).",
				Validators:  []validator.String{stringvalidator.OneOf(offsetsResets...)},
			},
			"to_timestamp": schema.StringAttribute{
				Optional:    true,
				Description: "An RFC 3339 time: each partition moves to its first record at or after it.",
				Validators:  []validator.String{rfc3339Time()},
			},
			"topics": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				Description: "Limit reset or to_timestamp to these topics (default: every topic the pipeline reads).",
				Validators: []validator.List{
					listvalidator.SizeBetween(1, 100),
					listvalidator.ValueStringsAre(stringvalidator.RegexMatches(topicName, "must be a Kafka topic name")),
				},
			},
			"replay_mode": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("append"),
				Description: "append (the default): replayed records are written again; replace: they replace the " +
					"rows already written for those offsets (Delta targets).",
				Validators: []validator.String{stringvalidator.OneOf("append", "replace")},
			},
			"clamp": schema.BoolAttribute{
				Optional:    true,
				Description: "Clamp targets outside [earliest, latest] instead of failing.",
			},
			"committed": schema.MapAttribute{
				Computed: true, ElementType: types.Int64Type,
				Description: `The offsets right after the change, keyed "topic:partition".`,
			},
		},
	}
}

func (r *pipelineOffsetsResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

func (r *pipelineOffsetsResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{
		resourcevalidator.ExactlyOneOf(path.MatchRoot("offsets"), path.MatchRoot("reset"), path.MatchRoot("to_timestamp")),
	}
}

// ValidateConfig refuses what the offsets API cannot do with the chosen change.
func (r *pipelineOffsetsResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var config pipelineOffsetsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	given := func(v attr.Value) bool { return !v.IsNull() && !v.IsUnknown() } // unknown may yet be null
	if given(config.Topics) && given(config.Offsets) {
		resp.Diagnostics.AddAttributeError(path.Root("topics"), "topics goes with reset or to_timestamp",
			"topics limits a reset or to_timestamp; explicit offsets name their partitions themselves.")
	}
	if config.Reset.ValueString() != "starting_offsets" {
		return
	}
	refuse := func(name string) {
		resp.Diagnostics.AddAttributeError(path.Root(name), "reset = \"starting_offsets\" takes no "+name,
			"A reset to the starting offsets moves every partition in append mode: leave out topics, clamp "+
				"and replay_mode = \"replace\".")
	}
	if given(config.Topics) {
		refuse("topics")
	}
	if config.Clamp.ValueBool() {
		refuse("clamp")
	}
	if config.ReplayMode.ValueString() == "replace" {
		refuse("replay_mode")
	}
}

func (r *pipelineOffsetsResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan pipelineOffsetsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.apply(ctx, plan, &resp.State, &resp.Diagnostics) {
		setIDIdentity(ctx, resp.Identity, plan.PipelineID.ValueString(), &resp.Diagnostics)
	}
}

func (r *pipelineOffsetsResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan pipelineOffsetsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.apply(ctx, plan, &resp.State, &resp.Diagnostics) {
		setIDIdentity(ctx, resp.Identity, plan.PipelineID.ValueString(), &resp.Diagnostics)
	}
}

// apply reads the offsets' ETag, makes the planned change under If-Match and stores the offsets it
// committed; false when Inlet refused it (the state stays as it was).
func (r *pipelineOffsetsResource) apply(ctx context.Context, plan pipelineOffsetsModel, state *tfsdk.State, diags *diag.Diagnostics) bool {
	const action = "Moving the pipeline's offsets"
	body, d := offsetsChangeBody(ctx, plan)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	target := offsetsPath(plan.PipelineID.ValueString())
	current, err := r.client.Get(ctx, target, nil)
	if err != nil {
		reportAPIError(diags, action, err)
		return false
	}
	var answer *inlet.Answer
	if body == nil { // reset = "starting_offsets"
		answer, err = r.client.DeleteAnswer(ctx, target, current.ETag)
	} else {
		answer, err = r.client.Patch(ctx, target, body, current.ETag)
	}
	var result offsetsChangeResult
	if err == nil {
		err = answer.Decode(&result)
	}
	if err != nil {
		reportAPIError(diags, action, err)
		return false
	}
	committed := make(map[string]attr.Value, len(result.Rows))
	for _, row := range result.Rows {
		committed[partitionKey(row.Topic, row.Partition)] = types.Int64Value(row.After)
	}
	plan.ID = plan.PipelineID
	plan.Committed = types.MapValueMust(types.Int64Type, committed)
	diags.Append(state.Set(ctx, &plan)...)
	return !diags.HasError()
}

// offsetsChangeBody is the OffsetsPatch of plan; nil for a reset to the starting offsets (a DELETE).
func offsetsChangeBody(ctx context.Context, plan pipelineOffsetsModel) (map[string]any, diag.Diagnostics) {
	var diags diag.Diagnostics
	if plan.Reset.ValueString() == "starting_offsets" {
		return nil, diags
	}
	body := map[string]any{"replay_mode": plan.ReplayMode.ValueString(), "clamp": plan.Clamp.ValueBool()}
	switch {
	case !plan.Offsets.IsNull():
		var offsets map[string]int64
		diags.Append(plan.Offsets.ElementsAs(ctx, &offsets, false)...)
		keys := make([]string, 0, len(offsets))
		for key := range offsets {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		entries := make([]map[string]any, 0, len(keys))
		for _, key := range keys {
			topic, partition, ok := splitPartitionKey(key)
			if !ok {
				diags.AddAttributeError(path.Root("offsets").AtMapKey(key), "Not a \"topic:partition\" key",
					"offsets key "+strconv.Quote(key)+` is not "topic:partition".`)
				continue
			}
			entries = append(entries, map[string]any{"topic": topic, "partition": partition, "offset": offsets[key]})
		}
		body["offsets"] = entries
	case !plan.Reset.IsNull():
		body["reset"] = plan.Reset.ValueString()
	default:
		body["to_timestamp"] = plan.ToTimestamp.ValueString()
	}
	if !plan.Topics.IsNull() {
		var topics []string
		diags.Append(plan.Topics.ElementsAs(ctx, &topics, false)...)
		body["topics"] = topics
	}
	return body, diags
}

// Read keeps the change as applied; only a deleted pipeline takes the resource with it.
func (r *pipelineOffsetsResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state pipelineOffsetsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, "/pipelines/"+state.PipelineID.ValueString())
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the pipeline", err)
		return
	}
	if answer == nil {
		removeGone(ctx, &resp.State, resp.Identity, state.PipelineID.ValueString(), &resp.Diagnostics)
		return
	}
	setIDIdentity(ctx, resp.Identity, state.PipelineID.ValueString(), &resp.Diagnostics)
}

// Delete leaves the offsets where they are: they are the pipeline's.
func (r *pipelineOffsetsResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState takes the pipeline's id (or an identity holding it); its committed offsets become
// offsets, so a configuration holding them plans no change.
func (r *pipelineOffsetsResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := req.ID
	if id == "" && req.Identity != nil {
		var fromIdentity types.String
		resp.Diagnostics.Append(req.Identity.GetAttribute(ctx, pathID, &fromIdentity)...)
		id = fromIdentity.ValueString()
	}
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, offsetsPath(id))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Importing the pipeline's offsets", err)
		return
	}
	if answer == nil {
		notFound(&resp.Diagnostics, "pipeline", id)
		return
	}
	var read offsetsRead
	if err := answer.Decode(&read); err != nil {
		reportAPIError(&resp.Diagnostics, "Importing the pipeline's offsets", err)
		return
	}
	committed := map[string]attr.Value{}
	for _, p := range read.Partitions {
		if p.Committed != nil {
			committed[partitionKey(p.Topic, p.Partition)] = types.Int64Value(*p.Committed)
		}
	}
	offsets := types.MapNull(types.Int64Type) // a pipeline never read has nothing to hold
	if len(committed) > 0 {
		offsets = types.MapValueMust(types.Int64Type, committed)
	}
	state := pipelineOffsetsModel{
		ID: types.StringValue(id), PipelineID: types.StringValue(id), Offsets: offsets,
		Reset: types.StringNull(), ToTimestamp: types.StringNull(), Topics: types.ListNull(types.StringType),
		ReplayMode: types.StringValue("append"), Clamp: types.BoolNull(),
		Committed: types.MapValueMust(types.Int64Type, committed),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
}

// partitionKeyValidator refuses an offsets key that is not "topic:partition", naming the key.
type partitionKeyValidator struct{}

func (partitionKeyValidator) Description(context.Context) string {
	return `must be "topic:partition": a Kafka topic name, a colon, a partition number`
}

func (v partitionKeyValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v partitionKeyValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, _, ok := splitPartitionKey(req.ConfigValue.ValueString()); !ok {
		resp.Diagnostics.AddAttributeError(req.Path, "Not a \"topic:partition\" key",
			"offsets key "+strconv.Quote(req.ConfigValue.ValueString())+" "+v.Description(ctx)+
				" (partition at most "+strconv.Itoa(maxPartition)+").")
	}
}
