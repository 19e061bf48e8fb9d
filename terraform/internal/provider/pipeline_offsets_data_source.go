package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// data "inlet_pipeline_offsets": a pipeline's per-partition committed offsets, watermarks and lag,
// as GET /pipelines/{id}/offsets reports them now.

var _ datasource.DataSourceWithConfigure = (*pipelineOffsetsDataSource)(nil)

func newPipelineOffsetsDataSource() datasource.DataSource { return &pipelineOffsetsDataSource{} }

type pipelineOffsetsDataSource struct{ withDataClient }

type pipelineOffsetsDataModel struct {
	PipelineID    types.String `tfsdk:"pipeline_id"`
	Committed     types.Map    `tfsdk:"committed"`
	Earliest      types.Map    `tfsdk:"earliest"`
	Latest        types.Map    `tfsdk:"latest"`
	Lag           types.Map    `tfsdk:"lag"`
	TotalLag      types.Int64  `tfsdk:"total_lag"`
	ClusterStatus types.String `tfsdk:"cluster_status"`
}

func (d *pipelineOffsetsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pipeline_offsets"
}

func (d *pipelineOffsetsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	perPartition := func(description string) schema.MapAttribute {
		return schema.MapAttribute{Computed: true, ElementType: types.Int64Type,
			Description: description + `, keyed "topic:partition".`}
	}
	resp.Schema = schema.Schema{
		Description: "A pipeline's per-partition committed offsets, watermarks and lag.",
		Attributes: map[string]schema.Attribute{
			"pipeline_id": schema.StringAttribute{Required: true, Description: "The pipeline's id."},
			"committed":   perPartition("The next offset to read (partitions never read are absent)"),
			"earliest":    perPartition("Log start offsets (empty when the cluster was not reached)"),
			"latest":      perPartition("Last stable offsets (empty when the cluster was not reached)"),
			"lag":         perPartition("Records between where the pipeline stands and latest"),
			"total_lag": schema.Int64Attribute{Computed: true,
				Description: "The partitions' lag summed; null when the cluster was not reached."},
			"cluster_status": schema.StringAttribute{Computed: true,
				Description: "Whether the cluster answered: ok, unreachable or error."},
		},
	}
}

func (d *pipelineOffsetsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var config pipelineOffsetsDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	const action = "Reading the pipeline's offsets"
	id := config.PipelineID.ValueString()
	answer, err := d.client.Find(ctx, offsetsPath(id))
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	if answer == nil {
		notFound(&resp.Diagnostics, "pipeline", id)
		return
	}
	var read offsetsRead
	if err := answer.Decode(&read); err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	committed, earliest, latest, lag := map[string]attr.Value{}, map[string]attr.Value{}, map[string]attr.Value{}, map[string]attr.Value{}
	keep := func(into map[string]attr.Value, key string, value *int64) {
		if value != nil {
			into[key] = types.Int64Value(*value)
		}
	}
	for _, p := range read.Partitions {
		key := partitionKey(p.Topic, p.Partition)
		keep(committed, key, p.Committed)
		keep(earliest, key, p.Earliest)
		keep(latest, key, p.Latest)
		keep(lag, key, p.Lag)
	}
	state := pipelineOffsetsDataModel{
		PipelineID: config.PipelineID,
		Committed:  types.MapValueMust(types.Int64Type, committed),
		Earliest:   types.MapValueMust(types.Int64Type, earliest),
		Latest:     types.MapValueMust(types.Int64Type, latest),
		Lag:        types.MapValueMust(types.Int64Type, lag),
		TotalLag:   types.Int64PointerValue(read.TotalLag), ClusterStatus: types.StringValue(read.Cluster.Status),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
