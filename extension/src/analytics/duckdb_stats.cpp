// Column statistics for anker_scan. DuckDB's C API (1.5.6) lets a table function give a
// cardinality but no column statistics, and its optimizer needs them for a perfect hash
// join (a dense integer key on the build side), to drop filters that always hold, and to
// prove a join empty. This file sets the statistics callback of the C API's table function
// (a duckdb::TableFunction underneath) and answers it from anker's column bounds.
//
// It is compiled against the C++ headers of exactly the DuckDB release the prebuilt
// archives were built from (scripts/duckdb-prebuilt.sh fetches both and checks the
// version): layouts of TableFunction and CTableBindData are those of that release.
#include "duckdb/main/capi/capi_internal_table.hpp"
#include "duckdb/storage/statistics/numeric_stats.hpp"

using namespace duckdb;

extern "C" {
// Rust (src/analytics/scan.rs): the bounds of column `column` of the input bound as
// `bind_data`, as DuckDB stores the type `kind` names; false if there are none. Every value
// the scan produces lies within them.
bool anker_scan_bounds(void *bind_data, uint64_t column, int32_t *kind, int64_t *lo, int64_t *hi);
}

namespace {

enum BoundKind : int32_t { SMALLINT_BOUNDS = 0, INTEGER_BOUNDS = 1, BIGINT_BOUNDS = 2, DATE_BOUNDS = 3, TIMESTAMP_BOUNDS = 4 };

unique_ptr<BaseStatistics> anker_statistics(ClientContext &, const FunctionData *bind_data, column_t column) {
	auto &data = bind_data->Cast<CTableBindData>();
	int32_t kind;
	int64_t lo, hi;
	if (!anker_scan_bounds(data.bind_data, column, &kind, &lo, &hi)) {
		return nullptr;
	}
	Value min, max;
	switch (kind) {
	case SMALLINT_BOUNDS:
		min = Value::SMALLINT(int16_t(lo));
		max = Value::SMALLINT(int16_t(hi));
		break;
	case INTEGER_BOUNDS:
		min = Value::INTEGER(int32_t(lo));
		max = Value::INTEGER(int32_t(hi));
		break;
	case BIGINT_BOUNDS:
		min = Value::BIGINT(lo);
		max = Value::BIGINT(hi);
		break;
	case DATE_BOUNDS:
		min = Value::DATE(date_t(int32_t(lo)));
		max = Value::DATE(date_t(int32_t(hi)));
		break;
	case TIMESTAMP_BOUNDS:
		min = Value::TIMESTAMP(timestamp_t(lo));
		max = Value::TIMESTAMP(timestamp_t(hi));
		break;
	default:
		return nullptr;
	}
	// NULLs may occur: only the range is promised.
	auto stats = NumericStats::CreateUnknown(min.type());
	NumericStats::SetMin(stats, min);
	NumericStats::SetMax(stats, max);
	return stats.ToUnique();
}

// The row count anker_scan's bind set (duckdb_bind_set_cardinality), as an estimate only.
// The C API of 1.5.6 makes a count it is told is not exact the maximum as well, and with
// column bounds the optimizer takes a maximum as proof, e.g. that a sum fits in 64 bits;
// but rows may be added between planning and execution.
unique_ptr<NodeStatistics> anker_cardinality(ClientContext &, const FunctionData *bind_data) {
	auto &data = bind_data->Cast<CTableBindData>();
	if (!data.stats || !data.stats->has_estimated_cardinality) {
		return nullptr;
	}
	return make_uniq<NodeStatistics>(data.stats->estimated_cardinality);
}

} // namespace

extern "C" void anker_table_function_statistics(duckdb_table_function function) {
	auto &f = *reinterpret_cast<TableFunction *>(function);
	f.statistics = anker_statistics;
	f.cardinality = anker_cardinality;
}
