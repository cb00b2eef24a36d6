/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The contract, the bouncer and the policy agree: every method in
 * dbus/org.vivarium.Vivarium1.xml has a row in the authority's action map,
 * every interface has a read action (properties, tree, signals), every row
 * names a member that exists and an action the polkit policy declares, and
 * every declared action is used. Driven by the XML, so a new or renamed
 * interface is checked without touching this file.
 */
#define G_LOG_DOMAIN "TestContract"

#include "config.h"

#include <string.h>

#include <gio/gio.h>

#include "vivarium-names.h"
#include "vd-authority.h"

/* Declared in the policy ahead of their verbs; each must leave this list
 * when its verb lands. */
static const gchar *const reserved_actions[] = {
  NULL,
};

static GDBusNodeInfo *contract;
static GPtrArray *policy_actions;

static const gchar *
require_env (const gchar *name)
{
  const gchar *value = g_getenv (name);

  if (value == NULL || value[0] == '\0')
    g_error ("%s is not set; run this test through meson", name);
  return value;
}

static void
policy_start_element (GMarkupParseContext *context, const gchar *element, const gchar **names,
                      const gchar **values, gpointer user_data, GError **error)
{
  if (g_strcmp0 (element, "action") != 0)
    return;
  for (guint i = 0; names[i] != NULL; i++) {
    if (g_strcmp0 (names[i], "id") == 0)
      g_ptr_array_add (policy_actions, g_strdup (values[i]));
  }
}

static void
load (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *xml = NULL;
  g_autofree gchar *policy = NULL;
  GMarkupParser parser = { policy_start_element, NULL, NULL, NULL, NULL };
  g_autoptr(GMarkupParseContext) context = NULL;

  g_file_get_contents (require_env ("VIVARIUM_CONTRACT_XML"), &xml, NULL, &error);
  g_assert_no_error (error);
  contract = g_dbus_node_info_new_for_xml (xml, &error);
  g_assert_no_error (error);

  policy_actions = g_ptr_array_new_with_free_func (g_free);
  g_file_get_contents (require_env ("VIVARIUM_POLICY_IN"), &policy, NULL, &error);
  g_assert_no_error (error);
  context = g_markup_parse_context_new (&parser, G_MARKUP_IGNORE_QUALIFIED, NULL, NULL);
  g_markup_parse_context_parse (context, policy, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (policy_actions->len, >, 0);
  g_assert_nonnull (contract->interfaces);
  g_assert_nonnull (contract->interfaces[0]);
}

static gboolean
policy_declares (const gchar *action)
{
  for (guint i = 0; i < policy_actions->len; i++) {
    if (g_strcmp0 (g_ptr_array_index (policy_actions, i), action) == 0)
      return TRUE;
  }
  return FALSE;
}

static void
test_every_method_mapped (void)
{
  for (guint i = 0; contract->interfaces[i] != NULL; i++) {
    GDBusInterfaceInfo *iface = contract->interfaces[i];
    for (guint m = 0; iface->methods != NULL && iface->methods[m] != NULL; m++) {
      if (vd_authority_action_for (iface->name, iface->methods[m]->name) == NULL)
        g_test_fail_printf ("%s.%s has no row in the authority's action map", iface->name, iface->methods[m]->name);
    }
  }
}

static void
test_every_interface_readable (void)
{
  for (guint i = 0; contract->interfaces[i] != NULL; i++) {
    GDBusInterfaceInfo *iface = contract->interfaces[i];
    if (vd_authority_read_action_for (iface->name) == NULL)
      g_test_fail_printf ("%s has no read action (\"%s\" row): its properties and signals would be unguarded",
                          iface->name, VD_AUTHORITY_READ);
    for (guint s = 0; iface->signals != NULL && iface->signals[s] != NULL; s++)
      g_assert_nonnull (vd_authority_signal_action_for (iface->name, iface->signals[s]->name));
  }
}

/* A collection's Added and Removed signals tell as much as its List
 * method (a path per object): each needs the same action, or a peer polkit
 * refuses the list would learn it signal by signal. Manager.ReportAdded
 * once went to every read-status peer while ListReports needed
 * read-reports. */
static void
test_list_signals_follow_list (void)
{
  GDBusInterfaceInfo *manager = g_dbus_node_info_lookup_interface (contract, VIVARIUM_DBUS_IFACE_PREFIX ".Manager");
  guint n_checked = 0;

  g_assert_nonnull (manager);
  for (guint s = 0; manager->signals != NULL && manager->signals[s] != NULL; s++) {
    const gchar *name = manager->signals[s]->name;
    g_autofree gchar *noun = NULL;
    g_autofree gchar *list = NULL;
    const gchar *list_action;

    if (g_str_has_suffix (name, "Added"))
      noun = g_strndup (name, strlen (name) - strlen ("Added"));
    else if (g_str_has_suffix (name, "Removed"))
      noun = g_strndup (name, strlen (name) - strlen ("Removed"));
    else
      continue;
    list = g_strdup_printf ("List%ss", noun);
    if (g_dbus_interface_info_lookup_method (manager, list) == NULL) {
      g_test_fail_printf ("Manager.%s has no Manager.%s to follow", name, list);
      continue;
    }
    list_action = vd_authority_action_for (manager->name, list);
    if (g_strcmp0 (vd_authority_signal_action_for (manager->name, name), list_action) != 0)
      g_test_fail_printf ("Manager.%s is sent to the peers allowed %s, but %s needs %s", name,
                          vd_authority_signal_action_for (manager->name, name), list, list_action);
    n_checked++;
  }
  /* Sessions, projects, tasks, reports, images: both ways. */
  g_assert_cmpuint (n_checked, >=, 10);
}

static gboolean
member_exists (GDBusInterfaceInfo *iface, const VdActionRow *row)
{
  switch (row->kind) {
  case VD_ACTION_ROW_READ:   return g_strcmp0 (row->member, VD_AUTHORITY_READ) == 0;
  case VD_ACTION_ROW_METHOD: return g_dbus_interface_info_lookup_method (iface, row->member) != NULL;
  case VD_ACTION_ROW_SIGNAL: return g_dbus_interface_info_lookup_signal (iface, row->member) != NULL;
  default:                   return FALSE;
  }
}

static void
test_every_row_real (void)
{
  gsize n_rows = 0;
  const VdActionRow *rows = vd_authority_get_action_map (&n_rows);

  g_assert_cmpuint (n_rows, >, 0);
  for (gsize r = 0; r < n_rows; r++) {
    GDBusInterfaceInfo *iface = g_dbus_node_info_lookup_interface (contract, rows[r].interface);
    if (iface == NULL)
      g_test_fail_printf ("the map has a row for %s, which the contract does not define", rows[r].interface);
    else if (!member_exists (iface, &rows[r]))
      g_test_fail_printf ("the map has a row for %s.%s, which the contract does not define as that kind of member",
                          rows[r].interface, rows[r].member);
    if (!policy_declares (rows[r].action))
      g_test_fail_printf ("%s.%s maps to %s, which the polkit policy does not declare",
                          rows[r].interface, rows[r].member, rows[r].action);
  }
}

static void
test_every_action_used (void)
{
  gsize n_rows = 0;
  const VdActionRow *rows = vd_authority_get_action_map (&n_rows);

  for (guint i = 0; i < policy_actions->len; i++) {
    const gchar *action = g_ptr_array_index (policy_actions, i);
    gboolean used = FALSE;
    for (gsize r = 0; r < n_rows; r++)
      used = used || g_strcmp0 (rows[r].action, action) == 0;
    if (used && g_strv_contains (reserved_actions, action))
      g_test_fail_printf ("%s is used now: take it off the reserved list", action);
    else if (!used && !g_strv_contains (reserved_actions, action))
      g_test_fail_printf ("the policy declares %s, but no method or read maps to it", action);
  }
  for (guint i = 0; reserved_actions[i] != NULL; i++) {
    if (!policy_declares (reserved_actions[i]))
      g_test_fail_printf ("%s is reserved but the policy no longer declares it", reserved_actions[i]);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  load ();
  g_test_add_func ("/contract/every-method-mapped", test_every_method_mapped);
  g_test_add_func ("/contract/every-interface-readable", test_every_interface_readable);
  g_test_add_func ("/contract/every-row-real", test_every_row_real);
  g_test_add_func ("/contract/list-signals-follow-list", test_list_signals_follow_list);
  g_test_add_func ("/contract/every-action-used", test_every_action_used);
  return g_test_run ();
}
