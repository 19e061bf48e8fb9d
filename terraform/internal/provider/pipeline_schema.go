package provider

import (
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/boolvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A pipeline's source, target, schedule and contract as typed nested attributes, with the API's rules
// (openapi.yaml's KafkaSource, DeltaTarget, KafkaTarget, CronSchedule, IntervalSchedule, Contract) as
// validators: a bad value is an error at plan that names the attribute. Every attribute is optional
// unless the API requires it; one left out is left out of the request too, and Inlet's default applies.

var (
	topicName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	columnName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	fieldPath  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	groupName  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	schemaVer  = regexp.MustCompile(`^(latest|[1-9][0-9]*)$`)
	ruleName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

func optString(description string, validators ...validator.String) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Description: description, Validators: validators}
}

func optInt(description string, min, max int64) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Description: description,
		Validators: []validator.Int64{int64validator.Between(min, max)}}
}

func optBool(description string) schema.BoolAttribute {
	return schema.BoolAttribute{Optional: true, Description: description}
}

func columns(description string, max int) schema.ListAttribute {
	return schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: description,
		Validators: []validator.List{listvalidator.SizeAtMost(max), listvalidator.ValueStringsAre(
			stringvalidator.RegexMatches(columnName, "must be a column name"))}}
}

func oneOf(description string, values ...string) schema.StringAttribute {
	return optString(description, stringvalidator.OneOf(values...))
}

func registrySchema(part string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:    true,
		Description: "The " + part + "'s schema from the connection's schema registry.",
		Attributes: map[string]schema.Attribute{
			"subject": optString("Subject (default: TOPIC-"+part+", the topic name strategy).",
				stringvalidator.LengthBetween(1, 255)),
			"version": optString(`A version number ("3") or "latest" (the default): the schema a run reads with.`,
				stringvalidator.RegexMatches(schemaVer, `must be a version number or "latest"`)),
		},
	}
}

func sourceAttribute() schema.SingleNestedAttribute {
	sibling := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
	return schema.SingleNestedAttribute{
		Required:    true,
		Description: "The Kafka source: which topics, from where, and how values and keys are read.",
		Attributes: map[string]schema.Attribute{
			"connection_id": schema.StringAttribute{Required: true, Description: "The inlet_connection to read from."},
			"topics": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Description: "Topics to read (or topic_pattern).",
				Validators: []validator.List{
					listvalidator.SizeBetween(1, 100),
					listvalidator.ValueStringsAre(stringvalidator.RegexMatches(topicName, "must be a Kafka topic name")),
					listvalidator.ExactlyOneOf(sibling("topic_pattern")),
				}},
			"topic_pattern": optString("A regular expression: every topic it matches, new ones included.",
				stringvalidator.LengthBetween(1, 1000)),
			"starting_offsets": oneOf("Where a partition never read starts: earliest (the default) or latest.",
				"earliest", "latest"),
			"starting_partition_offsets": schema.MapAttribute{Optional: true,
				ElementType: types.MapType{ElemType: types.Int64Type},
				Description: `Exact starting offsets: { topic = { "0" = 42, … } }; instead of starting_offsets.`,
				Validators: []validator.Map{
					mapvalidator.KeysAre(stringvalidator.RegexMatches(topicName, "must be a Kafka topic name")),
					mapvalidator.ConflictsWith(sibling("starting_offsets"), sibling("starting_timestamp")),
				}},
			"starting_timestamp": optString("RFC 3339 time: a partition never read starts at its first record at "+
				"or after it.", rfc3339Time(), stringvalidator.ConflictsWith(sibling("starting_offsets"))),
			"starting_timestamp_strategy": oneOf("A partition with no record at or after starting_timestamp: "+
				"error (the default) or latest.", "error", "latest"),
			"max_offsets_per_run": optInt("At most this many records per partition in one run.", 1, 1_000_000_000_000),
			"commit_to_group": optString("Also commit offsets to this Kafka consumer group (for lag tools).",
				stringvalidator.LengthBetween(1, 249), stringvalidator.RegexMatches(groupName, "must be a group id")),
			"value_format": oneOf("raw (the default), string, json, avro, protobuf or json_schema.",
				"raw", "string", "json", "avro", "protobuf", "json_schema"),
			"schema": optString("A Spark DDL schema for json values (e.g. \"id BIGINT, name STRING\").",
				stringvalidator.LengthAtMost(65536)),
			"value_schema": registrySchema("value"),
			"key_format": oneOf("How keys are read: raw, string, avro, protobuf or json_schema.",
				"raw", "string", "avro", "protobuf", "json_schema"),
			"key_schema":      registrySchema("key"),
			"include_headers": optBool("Keep each record's headers in a headers column."),
			"on_data_loss": oneOf("Records gone before they were read (retention): fail (the default) or skip.",
				"fail", "skip"),
		},
	}
}

func maintenanceAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:    true,
		Description: "Table maintenance: compaction, vacuum and checkpoints (docs/maintenance.md).",
		Attributes: map[string]schema.Attribute{
			"enabled": optBool("Maintenance at all (default true)."),
			"compaction": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
				"enabled":         optBool("Default true."),
				"target_file_mb":  optInt("Size compacted files aim at (default 128).", 1, 1024),
				"min_small_files": optInt("Compact a partition once it holds this many small files (default 50).", 2, 1_000_000),
				"max_commits":     optInt("Or once this many commits passed (default 100).", 1, 1_000_000),
				"z_order_by":      columns("Z-order compacted files by these columns.", 4),
			}},
			"vacuum": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
				"enabled":         optBool("Default true."),
				"retention_hours": optInt("Keep files no longer referenced this long (default 168).", 0, 87600),
				"interval_hours":  optInt("Vacuum at most this often (default 24).", 1, 8760),
			}},
			"checkpoints": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
				"interval":           optInt("A checkpoint every this many commits (default 10).", 1, 10000),
				"log_retention_days": optInt("Keep the log this long (default 30).", 1, 3650),
			}},
		},
	}
}

func targetAttribute() schema.SingleNestedAttribute {
	other := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
	return schema.SingleNestedAttribute{
		Required:    true,
		Description: "Where records land: exactly one of delta or kafka.",
		Attributes: map[string]schema.Attribute{
			"delta": schema.SingleNestedAttribute{
				Optional:    true,
				Description: "A Delta table: appended to, or upserted by key (SCD type 1 or 2).",
				Validators:  []validator.Object{objectvalidator.ExactlyOneOf(other("kafka"))},
				Attributes: map[string]schema.Attribute{
					"path": schema.StringAttribute{Required: true, Description: "The table's path under the tenant's storage.",
						Validators: []validator.String{stringvalidator.LengthBetween(1, 512)}},
					"partition_by": columns("Partition the table by these columns.", 8),
					"mode":         oneOf("append (the default) or upsert (needs key).", "append", "upsert"),
					"key": schema.ListAttribute{Optional: true, ElementType: types.StringType,
						Description: "The key columns of an upsert.",
						Validators: []validator.List{listvalidator.SizeBetween(1, 16), listvalidator.ValueStringsAre(
							stringvalidator.RegexMatches(columnName, "must be a column name"))}},
					"key_from": oneOf("Where the key is read: value (the default) or kafka_key.", "value", "kafka_key"),
					"sequence_by": optString("A field ordering changes to one key (e.g. source.lsn).",
						stringvalidator.LengthAtMost(512), stringvalidator.RegexMatches(fieldPath, "must be a field path")),
					"changes": oneOf("rows (the default) or debezium change events.", "rows", "debezium"),
					"scd_type": schema.Int64Attribute{Optional: true, Description: "1 (the default): latest row per key; 2: history.",
						Validators: []validator.Int64{int64validator.OneOf(1, 2)}},
					"deletes":     oneOf("A delete event: mark (the default) or soft.", "mark", "soft"),
					"maintenance": maintenanceAttribute(),
					"table_features": schema.SingleNestedAttribute{Optional: true,
						Description: "Delta features the table is created with.",
						Attributes: map[string]schema.Attribute{
							"deletion_vectors": optBool("Default false."),
							"cluster_by":       columns("Liquid clustering columns.", 4),
						}},
				},
			},
			"kafka": schema.SingleNestedAttribute{
				Optional:    true,
				Description: "A Kafka topic, exactly once with transactions.",
				Attributes: map[string]schema.Attribute{
					"connection_id": schema.StringAttribute{Required: true, Description: "The inlet_connection to write to."},
					"topic": schema.StringAttribute{Required: true, Validators: []validator.String{
						stringvalidator.RegexMatches(topicName, "must be a Kafka topic name")}},
					"create_topic": schema.SingleNestedAttribute{Optional: true,
						Description: "Create the topic if it does not exist.",
						Attributes: map[string]schema.Attribute{
							"partitions": schema.Int64Attribute{Required: true,
								Validators: []validator.Int64{int64validator.Between(1, 10000)}},
							"replication_factor": optInt("Default -1: the broker's default.", -1, 32),
							"config": schema.MapAttribute{Optional: true, ElementType: types.StringType,
								Description: "Topic configs, e.g. { \"retention.ms\" = \"86400000\" }."},
						}},
				},
			},
		},
	}
}

func scheduleAttribute() schema.SingleNestedAttribute {
	other := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
	return schema.SingleNestedAttribute{
		Optional:    true,
		Description: "When runs start: cron (with timezone), interval_seconds, or continuous; none: only when triggered.",
		Attributes: map[string]schema.Attribute{
			"cron": optString("A cron expression, e.g. \"*/10 * * * *\".", stringvalidator.LengthBetween(9, 200),
				stringvalidator.ExactlyOneOf(other("interval_seconds"), other("continuous"))),
			"timezone": optString("The cron's IANA time zone (default UTC).", stringvalidator.LengthAtMost(64),
				stringvalidator.AlsoRequires(other("cron"))),
			"interval_seconds": optInt("A run every this many seconds.", 10, 2_678_400),
			"continuous": schema.BoolAttribute{Optional: true,
				Description: "true: each run starts as the previous one commits.",
				Validators:  []validator.Bool{boolvalidator.Equals(true)}},
			"idle_wait_ms": schema.Int64Attribute{Optional: true,
				Description: "Continuous: how long to wait before looking again when the topics had nothing new (default 500).",
				Validators: []validator.Int64{int64validator.Between(50, 60_000),
					int64validator.AlsoRequires(other("continuous"))}},
			"max_offsets_per_run": schema.Int64Attribute{Optional: true,
				Description: "Continuous: at most this many offsets a run (default 100000), so a backlog drains in several commits.",
				Validators: []validator.Int64{int64validator.Between(1, 1_000_000_000_000),
					int64validator.AlsoRequires(other("continuous"))}},
		},
	}
}

func contractAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Description: "The data contract of a Delta target's decoded rows: rules on each row, its sensitive " +
			"fields, and how the table's columns follow the source's; none: rows are not checked and are " +
			"written as they came.",
		Attributes: map[string]schema.Attribute{
			"expectations": schema.ListNestedAttribute{
				Optional:    true,
				Description: "Up to 50 rules, evaluated in order, their names unique in any case (default none).",
				Validators:  []validator.List{listvalidator.SizeAtMost(50), uniqueNames()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true,
						Description: "Names the rule in the run's counts, the quarantine's reasons, metrics and webhooks.",
						Validators: []validator.String{stringvalidator.RegexMatches(ruleName,
							"must start with a letter or _, then up to 63 letters, digits or _")}},
					// Inlet parses the predicate and its 422 names it at apply; here only its length,
					// counted in characters as Inlet counts it.
					"predicate": schema.StringAttribute{Required: true,
						Description: "A Spark SQL condition on the row's columns, e.g. \"amount > 0\": a row violates the rule " +
							"when it is false (null passes).",
						Validators: []validator.String{stringvalidator.UTF8LengthBetween(1, 2000)}},
					"action": oneOf("What becomes of a violating row: warn (the default: counted and written), "+
						"quarantine (written to the quarantine table instead) or fail (the run fails before its commit).",
						"warn", "quarantine", "fail"),
					"alert_over_rows": optInt("pipeline.expectation_exceeded fires when a run has more violating rows "+
						"than this.", 1, 1_000_000_000_000_000),
					"alert_over_ratio": schema.Float64Attribute{Optional: true,
						Description: "Or when more than this share of its records violate it (0 < ratio <= 1).",
						Validators:  []validator.Float64{float64validator.AtMost(1), aboveZero()}},
				}},
			},
			// Defaulted as the pipeline's state is; a contract Inlet holds without it reads as add
			// (contractFromAPI). A policy other than add on a Kafka target or raw or string values, and
			// widen on an upsert, need the source and the target: Inlet's 422 names contract.evolution
			// at apply.
			"evolution": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("add"),
				Description: "How the table's columns follow the source's fields: add (the default: a new field becomes a " +
					"nullable column, a changed type fails the run), widen (as add, and a type that widens, TINYINT to " +
					"SMALLINT to INT to BIGINT, FLOAT or an integer up to INT to DOUBLE, a DECIMAL's precision up at the same scale, widens " +
					"the column by Delta's type widening; an append table's) or fail (any new field or changed type " +
					"fails the run).",
				Validators: []validator.String{stringvalidator.OneOf("add", "widen", "fail")}},
			// Whether a field is a column of the row, and a key, partition or clustering column only
			// hashed, needs the source's schema and the target: Inlet's 422 names it at apply.
			"sensitive": schema.ListNestedAttribute{
				Optional: true,
				Description: "Up to 100 fields hashed, redacted or dropped before anything is written, after the " +
					"expectations tested the row, each named once in any case (default none).",
				Validators: []validator.List{listvalidator.SizeAtMost(100), uniqueFields()},
				NestedObject: schema.NestedAttributeObject{
					Validators: []validator.Object{topLevelDrop()},
					Attributes: map[string]schema.Attribute{
						"field": schema.StringAttribute{Required: true,
							Description: "A column, or a field of a struct column, dotted (customer.email; hash and redact).",
							Validators:  []validator.String{structField()}},
						"action": schema.StringAttribute{Required: true,
							Description: "hash (HMAC-SHA-256 keyed with the tenant's field key: 64 hex characters, the same " +
								"value hashing the same in every pipeline of the tenant), redact (the mask REDACTED) or " +
								"drop (not written; a top-level column). hash and redact take string fields.",
							Validators: []validator.String{stringvalidator.OneOf("hash", "redact", "drop")}},
					},
				},
			},
		},
	}
}
