package provider

import (
	"context"
	"net/url"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// data "inlet_usage": the tenant's usage over a range (GET /usage), summed over the range and per
// pipeline and hour (or day).

var _ datasource.DataSourceWithConfigure = (*usageDataSource)(nil)

// runOutcomes are RunsByOutcome's fields: what runs holds, zero included.
var runOutcomes = []string{"succeeded", "failed", "retried", "cancelled", "skipped"}

func newUsageDataSource() datasource.DataSource { return &usageDataSource{} }

type usageDataSource struct{ withDataClient }

// usageFigures are UsageRow's figures, summed over the range at the top and per bucket in buckets.
type usageFigures struct {
	RecordsRead     int64            `tfsdk:"records_read" json:"records_read"`
	RowsWritten     int64            `tfsdk:"rows_written" json:"rows_written"`
	RowsQuarantined int64            `tfsdk:"rows_quarantined" json:"rows_quarantined"`
	BytesRead       int64            `tfsdk:"bytes_read" json:"bytes_read"`
	BytesWritten    int64            `tfsdk:"bytes_written" json:"bytes_written"`
	WallSeconds     float64          `tfsdk:"wall_seconds" json:"wall_seconds"`
	EngineSeconds   float64          `tfsdk:"engine_seconds" json:"engine_seconds"`
	Runs            map[string]int64 `tfsdk:"runs" json:"runs"`
}

func (f *usageFigures) add(row usageFigures) {
	f.RecordsRead += row.RecordsRead
	f.RowsWritten += row.RowsWritten
	f.RowsQuarantined += row.RowsQuarantined
	f.BytesRead += row.BytesRead
	f.BytesWritten += row.BytesWritten
	f.WallSeconds += row.WallSeconds
	f.EngineSeconds += row.EngineSeconds
	for outcome, n := range row.Runs {
		f.Runs[outcome] += n
	}
}

// usageBucket is one UsageRow: one pipeline's usage in one hour (or day).
type usageBucket struct {
	PipelineID   *string `tfsdk:"pipeline_id" json:"pipeline_id"`
	PipelineName *string `tfsdk:"pipeline_name" json:"pipeline_name"`
	Bucket       string  `tfsdk:"bucket" json:"bucket"`
	usageFigures
}

type usageModel struct {
	PipelineID  types.String `tfsdk:"pipeline_id"`
	From        types.String `tfsdk:"from"`
	To          types.String `tfsdk:"to"`
	Granularity types.String `tfsdk:"granularity"`
	usageFigures
	Buckets []usageBucket `tfsdk:"buckets"`
}

// usageReport is UsageReport.
type usageReport struct {
	From        string        `json:"from"`
	To          string        `json:"to"`
	Granularity string        `json:"granularity"`
	Items       []usageBucket `json:"items"`
}

func (d *usageDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_usage"
}

func usageFigureAttributes(over string) map[string]schema.Attribute {
	count := func(description string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, Description: description + " " + over + "."}
	}
	seconds := func(description string) schema.Float64Attribute {
		return schema.Float64Attribute{Computed: true, Description: description + " " + over + "."}
	}
	return map[string]schema.Attribute{
		"records_read":     count("Kafka records read by every attempt (a retry or a replay reads again),"),
		"rows_written":     count("Rows written to the target (quarantined rows not included),"),
		"rows_quarantined": count("Rows quarantined,"),
		"bytes_read":       count("Bytes of the records' keys and values read,"),
		"bytes_written":    count("Bytes of the files written to Delta targets (0 for Kafka targets),"),
		"wall_seconds":     seconds("Seconds from a worker's claim to the attempt's end,"),
		"engine_seconds":   seconds("The Spark jobs' own seconds,"),
		"runs": schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
			Description: "Attempts by outcome (succeeded, failed, retried, cancelled, skipped) " + over + "."},
	}
}

func (d *usageDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	bucket := usageFigureAttributes("in the bucket")
	bucket["pipeline_id"] = schema.StringAttribute{Computed: true, Description: "The pipeline (a deleted one too)."}
	bucket["pipeline_name"] = schema.StringAttribute{Computed: true,
		Description: "The pipeline's latest name, kept after it is deleted."}
	bucket["bucket"] = schema.StringAttribute{Computed: true, Description: "The hour's (or day's) start, UTC."}

	attributes := usageFigureAttributes("over the range")
	attributes["pipeline_id"] = schema.StringAttribute{Optional: true,
		Description: "Only this pipeline (a deleted one too); default: every pipeline of the tenant."}
	attributes["from"] = schema.StringAttribute{Optional: true, Computed: true,
		Description: "RFC 3339 start, inclusive; default: a day (hour) or 30 days (day) before to.",
		Validators:  []validator.String{rfc3339Time()}}
	attributes["to"] = schema.StringAttribute{Optional: true, Computed: true,
		Description: "RFC 3339 end, exclusive; default: the end of the current hour (or day, UTC).",
		Validators:  []validator.String{rfc3339Time()}}
	attributes["granularity"] = schema.StringAttribute{Optional: true, Computed: true,
		Description: "hour (the default) or day: one bucket per pipeline and hour or day.",
		Validators:  []validator.String{stringvalidator.OneOf("hour", "day")}}
	attributes["buckets"] = schema.ListNestedAttribute{Computed: true,
		Description:  "The buckets with any usage, oldest first: one per pipeline and hour (or day).",
		NestedObject: schema.NestedAttributeObject{Attributes: bucket}}

	resp.Schema = schema.Schema{
		Description: "The tenant's usage over a range (GET /usage): summed, and per pipeline and hour or day.",
		Attributes:  attributes,
	}
}

func (d *usageDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var config usageModel // the arguments only: the figures are computed
	query := url.Values{}
	for name, into := range map[string]*types.String{
		"pipeline_id": &config.PipelineID, "from": &config.From, "to": &config.To, "granularity": &config.Granularity,
	} {
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(name), into)...)
		if !into.IsNull() {
			query.Set(name, into.ValueString())
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	const action = "Reading the usage"
	answer, err := d.client.Get(ctx, "/usage", query)
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	var report usageReport
	if err := answer.Decode(&report); err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	state := usageModel{
		PipelineID:  config.PipelineID,
		From:        usageTime(config.From, report.From),
		To:          usageTime(config.To, report.To),
		Granularity: types.StringValue(report.Granularity),
		Buckets:     report.Items,
	}
	state.Runs = make(map[string]int64, len(runOutcomes))
	for _, outcome := range runOutcomes {
		state.Runs[outcome] = 0
	}
	for _, row := range report.Items {
		state.add(row.usageFigures)
	}
	if state.Buckets == nil {
		state.Buckets = []usageBucket{}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// usageTime is the configured time when Inlet's answer is the same instant written otherwise
// (2026-01-31T13:00:00+01:00 for 2026-01-31T12:00:00Z), else Inlet's.
func usageTime(configured types.String, answered string) types.String {
	if configured.IsNull() || configured.IsUnknown() {
		return types.StringValue(answered)
	}
	mine, err1 := time.Parse(time.RFC3339Nano, configured.ValueString())
	theirs, err2 := time.Parse(time.RFC3339Nano, answered)
	if err1 == nil && err2 == nil && mine.Equal(theirs) {
		return configured
	}
	return types.StringValue(answered)
}
