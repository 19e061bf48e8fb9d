package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// The typed blocks (a pipeline's source, target and schedule) are documents in Inlet's API. These two
// functions move them between Terraform values and JSON by the schema's types alone: a null attribute
// is a field left out (Inlet keeps its default), a field Inlet does not return is null. Inlet stores
// documents as written, so what a configuration sets reads back as set and nothing else appears.

// toJSON is v as Inlet takes it; ok is false while any part of v is unknown.
func toJSON(v attr.Value) (out any, ok bool) {
	if v.IsUnknown() {
		return nil, false
	}
	if v.IsNull() {
		return nil, true
	}
	switch t := v.(type) {
	case basetypes.StringValue:
		return t.ValueString(), true
	case basetypes.BoolValue:
		return t.ValueBool(), true
	case basetypes.Int64Value:
		return t.ValueInt64(), true
	case basetypes.Float64Value:
		return t.ValueFloat64(), true
	case basetypes.NumberValue:
		f, _ := t.ValueBigFloat().Float64()
		return f, true
	case basetypes.ListValue:
		return elementsJSON(t.Elements())
	case basetypes.SetValue:
		return elementsJSON(t.Elements())
	case basetypes.MapValue:
		return fieldsJSON(t.Elements())
	case basetypes.ObjectValue:
		return fieldsJSON(t.Attributes())
	}
	panic(fmt.Sprintf("toJSON: no conversion for %T", v))
}

func elementsJSON(elems []attr.Value) (any, bool) {
	out := make([]any, 0, len(elems))
	for _, e := range elems {
		j, ok := toJSON(e)
		if !ok {
			return nil, false
		}
		out = append(out, j)
	}
	return out, true
}

func fieldsJSON(fields map[string]attr.Value) (any, bool) {
	out := make(map[string]any, len(fields))
	for name, f := range fields {
		j, ok := toJSON(f)
		if !ok {
			return nil, false
		}
		if j != nil {
			out[name] = j
		}
	}
	return out, true
}

// fromJSON is the Terraform value of type t that raw (decoded with UseNumber) holds.
func fromJSON(ctx context.Context, raw any, t attr.Type) (attr.Value, error) {
	if raw == nil {
		return nullOf(t), nil
	}
	switch tt := t.(type) {
	case basetypes.StringType:
		if s, ok := raw.(string); ok {
			return types.StringValue(s), nil
		}
		if n, ok := raw.(json.Number); ok { // an option Inlet stores as a number, held as text
			return types.StringValue(n.String()), nil
		}
		if b, ok := raw.(bool); ok {
			return types.StringValue(fmt.Sprint(b)), nil
		}
	case basetypes.BoolType:
		if b, ok := raw.(bool); ok {
			return types.BoolValue(b), nil
		}
	case basetypes.Int64Type:
		if n, ok := raw.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return types.Int64Value(i), nil
			}
		}
	case basetypes.Float64Type:
		if n, ok := raw.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return types.Float64Value(f), nil
			}
		}
	case basetypes.NumberType:
		if n, ok := raw.(json.Number); ok {
			if f, ok := new(big.Float).SetString(n.String()); ok {
				return types.NumberValue(f), nil
			}
		}
	case basetypes.ListType:
		if items, ok := raw.([]any); ok {
			elems, err := elementsFrom(ctx, items, tt.ElemType)
			if err != nil {
				return nil, err
			}
			v, d := types.ListValue(tt.ElemType, elems)
			return v, diagErr(d)
		}
	case basetypes.SetType:
		if items, ok := raw.([]any); ok {
			elems, err := elementsFrom(ctx, items, tt.ElemType)
			if err != nil {
				return nil, err
			}
			v, d := types.SetValue(tt.ElemType, elems)
			return v, diagErr(d)
		}
	case basetypes.MapType:
		if fields, ok := raw.(map[string]any); ok {
			elems := make(map[string]attr.Value, len(fields))
			for _, k := range sortedKeys(fields) {
				e, err := fromJSON(ctx, fields[k], tt.ElemType)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				elems[k] = e
			}
			v, d := types.MapValue(tt.ElemType, elems)
			return v, diagErr(d)
		}
	case basetypes.ObjectType:
		if fields, ok := raw.(map[string]any); ok {
			attrs := make(map[string]attr.Value, len(tt.AttrTypes))
			for name, at := range tt.AttrTypes {
				a, err := fromJSON(ctx, fields[name], at)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				attrs[name] = a
			}
			v, d := types.ObjectValue(tt.AttrTypes, attrs)
			return v, diagErr(d)
		}
	}
	return nil, fmt.Errorf("Inlet returned %v where the schema has %s", raw, t)
}

func elementsFrom(ctx context.Context, items []any, t attr.Type) ([]attr.Value, error) {
	elems := make([]attr.Value, 0, len(items))
	for i, item := range items {
		e, err := fromJSON(ctx, item, t)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		elems = append(elems, e)
	}
	return elems, nil
}

func nullOf(t attr.Type) attr.Value {
	switch tt := t.(type) {
	case basetypes.StringType:
		return types.StringNull()
	case basetypes.BoolType:
		return types.BoolNull()
	case basetypes.Int64Type:
		return types.Int64Null()
	case basetypes.Float64Type:
		return types.Float64Null()
	case basetypes.NumberType:
		return types.NumberNull()
	case basetypes.ListType:
		return types.ListNull(tt.ElemType)
	case basetypes.SetType:
		return types.SetNull(tt.ElemType)
	case basetypes.MapType:
		return types.MapNull(tt.ElemType)
	case basetypes.ObjectType:
		return types.ObjectNull(tt.AttrTypes)
	}
	panic(fmt.Sprintf("nullOf: no null for %T", t))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func diagErr(d interface{ HasError() bool }) error {
	if d.HasError() {
		return fmt.Errorf("%v", d)
	}
	return nil
}

// decodeJSON decodes body with numbers kept exact (json.Number).
func decodeJSON(body []byte) (any, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	return raw, nil
}
