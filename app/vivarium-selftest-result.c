/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-selftest-result.h"
#include "vivarium-state.h"

#include <json-glib/json-glib.h>

/* The daemon writes this JSON, but a result can also come from a file or an
 * older daemon: every field is checked, and anything missing reads as "". */

struct _VivariumSelftestResult {
  char       *verdict;
  char       *finished;
  GPtrArray  *columns;  /* char*, configurations in the order given */
  GPtrArray  *rows;     /* char*, "probe (transport)" in order of appearance */
  GHashTable *cells;    /* "row\ncolumn" → VivariumSelftestCell* */
};

static void
cell_free (gpointer data)
{
  VivariumSelftestCell *cell = data;

  g_free (cell->outcome);
  g_free (cell->evidence);
  g_free (cell);
}

void
vivarium_selftest_result_free (VivariumSelftestResult *result)
{
  if (result == NULL)
    return;
  g_free (result->verdict);
  g_free (result->finished);
  g_ptr_array_unref (result->columns);
  g_ptr_array_unref (result->rows);
  g_hash_table_unref (result->cells);
  g_free (result);
}

static const char *
member_string (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return "";
  return json_node_get_string (node);
}

static guint
index_of (GPtrArray *array, const char *s)
{
  guint i;

  if (g_ptr_array_find_with_equal_func (array, s, g_str_equal, &i))
    return i;
  g_ptr_array_add (array, g_strdup (s));
  return array->len - 1;
}

static void
add_probe (VivariumSelftestResult *result, JsonNode *node)
{
  g_autoptr(JsonGenerator) gen = NULL;
  g_autofree char *row = NULL;
  VivariumSelftestCell *cell;
  JsonObject *probe;
  guint r, c;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return;
  probe = json_node_get_object (node);
  row = g_strdup_printf ("%s (%s)", member_string (probe, "probe"), member_string (probe, "transport"));
  r = index_of (result->rows, row);
  c = index_of (result->columns, member_string (probe, "configuration"));
  gen = json_generator_new ();
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_root (gen, node);
  cell = g_new0 (VivariumSelftestCell, 1);
  cell->outcome = g_strdup (member_string (probe, "outcome"));
  cell->evidence = json_generator_to_data (gen, NULL);
  g_hash_table_replace (result->cells, g_strdup_printf ("%u\n%u", r, c), cell);
}

VivariumSelftestResult *
vivarium_selftest_result_parse (const char *json, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(VivariumSelftestResult) result = NULL;
  JsonObject *root;
  JsonNode *node;

  if (!json_parser_load_from_data (parser, json, -1, error))
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the result is not a JSON object");
    return NULL;
  }
  root = json_node_get_object (json_parser_get_root (parser));
  result = g_new0 (VivariumSelftestResult, 1);
  result->verdict = g_strdup (member_string (root, "verdict"));
  result->finished = g_strdup (member_string (root, "finished-at"));
  result->columns = g_ptr_array_new_with_free_func (g_free);
  result->rows = g_ptr_array_new_with_free_func (g_free);
  result->cells = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, cell_free);
  /* Columns in the daemon's order first, then any a probe names. */
  node = json_object_get_member (root, "configurations");
  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node)) {
    JsonArray *configs = json_node_get_array (node);

    for (guint i = 0; i < json_array_get_length (configs); i++) {
      JsonNode *item = json_array_get_element (configs, i);

      if (JSON_NODE_HOLDS_VALUE (item) && json_node_get_value_type (item) == G_TYPE_STRING)
        index_of (result->columns, json_node_get_string (item));
    }
  }
  node = json_object_get_member (root, "probes");
  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node)) {
    JsonArray *probes = json_node_get_array (node);

    for (guint i = 0; i < json_array_get_length (probes); i++)
      add_probe (result, json_array_get_element (probes, i));
  }
  return g_steal_pointer (&result);
}

const char *
vivarium_selftest_result_verdict (VivariumSelftestResult *result)
{
  return result->verdict;
}

const char *
vivarium_selftest_result_finished (VivariumSelftestResult *result)
{
  return result->finished;
}

guint
vivarium_selftest_result_n_columns (VivariumSelftestResult *result)
{
  return result->columns->len;
}

const char *
vivarium_selftest_result_column (VivariumSelftestResult *result, guint column)
{
  g_return_val_if_fail (column < result->columns->len, NULL);
  return g_ptr_array_index (result->columns, column);
}

guint
vivarium_selftest_result_n_rows (VivariumSelftestResult *result)
{
  return result->rows->len;
}

const char *
vivarium_selftest_result_row (VivariumSelftestResult *result, guint row)
{
  g_return_val_if_fail (row < result->rows->len, NULL);
  return g_ptr_array_index (result->rows, row);
}

const VivariumSelftestCell *
vivarium_selftest_result_cell (VivariumSelftestResult *result, guint row, guint column)
{
  g_autofree char *key = g_strdup_printf ("%u\n%u", row, column);

  return g_hash_table_lookup (result->cells, key);
}

guint
vivarium_selftest_result_count (VivariumSelftestResult *result, const char *outcome)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&iter, result->cells);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    n += g_strcmp0 (((VivariumSelftestCell *) value)->outcome, outcome) == 0;
  return n;
}

/* 0: a cell failed, 1: one was inconclusive, 2: all passed (or none ran). */
static guint
row_rank (VivariumSelftestResult *result, guint row)
{
  guint rank = 2;

  for (guint c = 0; c < result->columns->len; c++) {
    const VivariumSelftestCell *cell = vivarium_selftest_result_cell (result, row, c);
    VivariumVerdict verdict = VIVARIUM_VERDICT_INCONCLUSIVE;

    if (cell == NULL)
      continue;
    /* Anything not read as pass or fail is unsure. */
    if (!vivarium_verdict_from_string (cell->outcome, &verdict))
      verdict = VIVARIUM_VERDICT_INCONCLUSIVE;
    if (verdict != VIVARIUM_VERDICT_PASS)
      rank = MIN (rank, verdict == VIVARIUM_VERDICT_FAIL ? 0u : 1u);
  }
  return rank;
}

GArray *
vivarium_selftest_result_row_order (VivariumSelftestResult *result)
{
  GArray *order = g_array_sized_new (FALSE, FALSE, sizeof (guint), result->rows->len);

  for (guint rank = 0; rank <= 2; rank++) {
    for (guint r = 0; r < result->rows->len; r++) {
      if (row_rank (result, r) == rank)
        g_array_append_val (order, r);
    }
  }
  return order;
}
