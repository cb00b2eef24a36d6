/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdExported"

#include "config.h"

#include <string.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-exported.h"
#include "vd-log.h"
#include "vd-outgoing.h"

/* The one D-Bus boundary (like bolt's bolt-exported.c): every object of the
 * daemon reaches the bus through here and nowhere else.
 *
 * The skeletons are never exported themselves. The object tree is served
 * by GDBus subtrees (one at the manager's path, one per collection), whose
 * callbacks see the caller, so a caller learns a child exists only after
 * polkit allowed it to read. Our vtable has no get_property, so
 * Properties.Get/GetAll arrive as method calls and are authorized like
 * methods; after polkit said yes the call goes on to the skeleton's own
 * vtable. Signals and property changes of a skeleton are re-sent from here
 * as unicast messages, only to peers polkit allowed the signal's action.
 *
 * What a peer was allowed is remembered until it leaves the bus or a later
 * check refuses it. A peer that passes any check is also checked, in the
 * background, for the read actions, so a client that made one authorized
 * call hears what it may hear.
 *
 * The daemon may move the whole boundary to a new connection after it lost
 * the bus (vd_exported_set_connection()): the tree is registered again and
 * every grant is forgotten, since unique names are only unique on one bus
 * and the next bus hands the same ones to other peers. Whatever was still
 * being decided for a peer of the old connection is dropped, never granted. */

#define INTROSPECT_DOCTYPE \
  "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n" \
  "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n"
#define LOG_FIELD_MAX 200   /* refusals are logged by name, never by argument */
#define DETAIL_MAX    128

typedef struct _Face Face;

typedef struct {
  gchar     *path;
  GPtrArray *faces;       /* Face*, owned */
} Node;

struct _Face {
  VdExported             *self;       /* unowned: it owns us */
  GDBusInterfaceSkeleton *skeleton;
  GDBusInterfaceInfo     *info;
  const gchar            *path;       /* the node's */
  GHashTable             *prop_names; /* GObject name → D-Bus name (static) */
  GHashTable             *changed;    /* D-Bus names waiting for PropertiesChanged */
  GArray                 *handlers;   /* gulong */
  guint                   changed_idle;
};

struct _VdExported {
  GObject          parent_instance;
  VdAuthority     *authority;
  GDBusConnection *connection;
  GHashTable      *nodes;     /* path → Node */
  GHashTable      *subtrees;  /* path → registration id */
  GHashTable      *grants;    /* unique name → set of actions it was allowed */
  GHashTable      *pending;   /* "name action" being checked in the background */
  gint64           grant_us;  /* how long a read grant lasts */
  guint            refresh_id;
  GMainContext    *context;   /* where the subtrees and our Introspect run */
  guint            owner_changed_id;
  guint            filter_id;
};

G_DEFINE_TYPE (VdExported, vd_exported, G_TYPE_OBJECT)

static const GDBusInterfaceVTable boundary_vtable;
static const GDBusSubtreeVTable subtree_vtable;

/* --- faces: one skeleton on one path --------------------------------- */

static void
face_free (Face *face)
{
  for (guint i = 0; i < face->handlers->len; i++)
    g_signal_handler_disconnect (face->skeleton, g_array_index (face->handlers, gulong, i));
  g_clear_handle_id (&face->changed_idle, g_source_remove);
  g_array_unref (face->handlers);
  g_hash_table_unref (face->prop_names);
  g_hash_table_unref (face->changed);
  g_dbus_interface_info_unref (face->info);
  g_object_unref (face->skeleton);
  g_free (face);
}

static void
node_free (Node *node)
{
  g_ptr_array_unref (node->faces);
  g_free (node->path);
  g_free (node);
}

/* gdbus-codegen's name for a member's GObject signal or property:
 * "CommandFinished" → "command-finished", "Layer1" → "layer1". */
static gchar *
codegen_name (const gchar *dbus_name)
{
  GString *s = g_string_new (NULL);
  gboolean prev_was_lower = FALSE;

  for (const gchar *p = dbus_name; *p != '\0'; p++) {
    gboolean upper = g_ascii_isupper (*p);
    if (upper && prev_was_lower)
      g_string_append_c (s, '-');
    prev_was_lower = !upper;
    g_string_append_c (s, g_ascii_tolower (*p));
  }
  return g_string_free (s, FALSE);
}

static Face *
find_face (Node *node, const gchar *interface_name)
{
  for (guint i = 0; node != NULL && i < node->faces->len; i++) {
    Face *face = g_ptr_array_index (node->faces, i);
    if (g_strcmp0 (face->info->name, interface_name) == 0)
      return face;
  }
  return NULL;
}

/* --- grants ------------------------------------------------------------ */

/* Something that began on a connection we no longer serve. */
static gboolean
is_stale (VdExported *self, GDBusConnection *connection)
{
  return connection != self->connection;
}

typedef struct _Gate Gate;
static void start_read_check (VdExported *self, const gchar *sender, const gchar *action, Gate *gate);

/* A read grant lasts as long as polkit's own "keep" would
 * (VIVARIUM_READ_GRANT_SEC, [Daemon] ReadGrantSec=): halfway through it is
 * asked again in the background (refresh_grants_cb), so a peer still
 * allowed hears on without a gap; one polkit now refuses, or that is not
 * answered by the end, hears nothing more until an authorized call of its
 * own asks anew. */
static gboolean
is_granted (VdExported *self, const gchar *peer, const gchar *action)
{
  GHashTable *actions = g_hash_table_lookup (self->grants, peer);
  gint64 *expiry = actions != NULL ? g_hash_table_lookup (actions, g_intern_string (action)) : NULL;

  if (expiry == NULL)
    return FALSE;
  if (g_get_monotonic_time () >= *expiry) {
    g_hash_table_remove (actions, g_intern_string (action));
    return FALSE;
  }
  return TRUE;
}

/* Every grant past its halfway point is asked about again. */
static gboolean
refresh_grants_cb (gpointer user_data)
{
  VdExported *self = VD_EXPORTED (user_data);
  gint64 now = g_get_monotonic_time ();
  g_autoptr(GPtrArray) due = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter peers;
  gpointer peer, actions;

  if (self->connection == NULL)
    return G_SOURCE_CONTINUE;
  g_hash_table_iter_init (&peers, self->grants);
  while (g_hash_table_iter_next (&peers, &peer, &actions)) {
    GHashTableIter iter;
    gpointer action, expiry;

    g_hash_table_iter_init (&iter, actions);
    while (g_hash_table_iter_next (&iter, &action, &expiry)) {
      g_autofree gchar *key = g_strconcat (peer, " ", action, NULL);
      if (now >= *(gint64 *) expiry - self->grant_us / 2 && !g_hash_table_contains (self->pending, key))
        g_ptr_array_add (due, g_steal_pointer (&key));
    }
  }
  /* Started after the walk: a check adds to pending, and a refused one
   * removes from the grants. */
  for (guint i = 0; i < due->len; i++) {
    gchar *key = g_ptr_array_index (due, i);
    gchar *space = strchr (key, ' ');

    *space = '\0';
    start_read_check (self, key, space + 1, NULL);
  }
  return G_SOURCE_CONTINUE;
}

static void
forget_peer (VdExported *self, const gchar *peer)
{
  GHashTableIter iter;
  gpointer key;
  gsize len = strlen (peer);

  g_hash_table_remove (self->grants, peer);
  g_hash_table_iter_init (&iter, self->pending);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    if (strncmp (key, peer, len) == 0 && ((const gchar *) key)[len] == ' ')
      g_hash_table_iter_remove (&iter);
  }
}

typedef struct {
  GWeakRef  self;
  gchar    *peer;
} PeerProbe;

static void
peer_probe_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  PeerProbe *probe = user_data;
  g_autoptr(VdExported) self = g_weak_ref_get (&probe->self);
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, NULL);

  if (self != NULL && reply == NULL)
    forget_peer (self, probe->peer);
  g_weak_ref_clear (&probe->self);
  g_free (probe->peer);
  g_free (probe);
}

/* A peer may have left while polkit was deciding, and then its
 * NameOwnerChanged came before the grant: ask the bus once. */
static void
probe_peer (VdExported *self, const gchar *peer)
{
  PeerProbe *probe;

  if (self->connection == NULL)
    return;
  probe = g_new0 (PeerProbe, 1);
  g_weak_ref_init (&probe->self, self);
  probe->peer = g_strdup (peer);
  g_dbus_connection_call (self->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                          "GetNameOwner", g_variant_new ("(s)", peer), G_VARIANT_TYPE ("(s)"),
                          G_DBUS_CALL_FLAGS_NONE, 5000, NULL, peer_probe_cb, probe);
}

static void
grant_action (VdExported *self, const gchar *peer, const gchar *action)
{
  GHashTable *actions = g_hash_table_lookup (self->grants, peer);

  gint64 *expiry = g_new (gint64, 1);

  if (actions == NULL) {
    actions = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
    g_hash_table_insert (self->grants, g_strdup (peer), actions);
    probe_peer (self, peer);
  }
  *expiry = g_get_monotonic_time () + self->grant_us;
  g_hash_table_insert (actions, (gpointer) g_intern_string (action), expiry);
}

static void
revoke_action (VdExported *self, const gchar *peer, const gchar *action)
{
  GHashTable *actions = g_hash_table_lookup (self->grants, peer);

  if (actions != NULL)
    g_hash_table_remove (actions, g_intern_string (action));
}

static void
name_owner_changed_cb (GDBusConnection *connection, const gchar *sender, const gchar *path,
                       const gchar *interface, const gchar *signal, GVariant *params, gpointer user_data)
{
  VdExported *self = VD_EXPORTED (user_data);
  const gchar *name, *old_owner, *new_owner;

  g_variant_get (params, "(&s&s&s)", &name, &old_owner, &new_owner);
  if (name[0] == ':' && new_owner[0] == '\0')
    forget_peer (self, name);
}

/* --- sending to the peers that may hear it ------------------------------ */

static void
send_to_granted (VdExported *self, const gchar *action, const gchar *path, const gchar *interface_name,
                 const gchar *signal_name, GVariant *params)
{
  g_autoptr(GVariant) owned = g_variant_ref_sink (params);
  GHashTableIter iter;
  gpointer peer;

  if (self->connection == NULL)
    return;   /* off the bus: nobody is granted anything yet */
  g_hash_table_iter_init (&iter, self->grants);
  while (g_hash_table_iter_next (&iter, &peer, NULL)) {
    if (!is_granted (self, peer, action))
      continue;
    g_dbus_connection_emit_signal (self->connection, peer, path, interface_name, signal_name, owned, NULL);
  }
}

typedef struct {
  Face                  *face;
  const GDBusSignalInfo *info;
} SignalForward;

static void
forward_signal_marshal (GClosure *closure, GValue *return_value, guint n_param_values,
                        const GValue *param_values, gpointer invocation_hint, gpointer marshal_data)
{
  SignalForward *fwd = closure->data;
  Face *face = fwd->face;
  GVariantBuilder b;
  guint n_args = 0;

  while (fwd->info->args != NULL && fwd->info->args[n_args] != NULL)
    n_args++;
  g_return_if_fail (n_param_values == n_args + 1);
  g_variant_builder_init (&b, G_VARIANT_TYPE_TUPLE);
  for (guint i = 0; i < n_args; i++) {
    g_autoptr(GVariant) v = g_dbus_gvalue_to_gvariant (&param_values[i + 1],
                                                       G_VARIANT_TYPE (fwd->info->args[i]->signature));
    g_variant_builder_add_value (&b, v);
  }
  send_to_granted (face->self, vd_authority_signal_action_for (face->info->name, fwd->info->name),
                   face->path, face->info->name, fwd->info->name, g_variant_builder_end (&b));
}

static gboolean
connect_signals (Face *face, GError **error)
{
  for (guint i = 0; face->info->signals != NULL && face->info->signals[i] != NULL; i++) {
    const GDBusSignalInfo *info = face->info->signals[i];
    g_autofree gchar *name = codegen_name (info->name);
    guint signal_id = g_signal_lookup (name, G_OBJECT_TYPE (face->skeleton));
    SignalForward *fwd;
    GClosure *closure;
    gulong id;

    if (signal_id == 0) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                   "%s has no GObject signal “%s” for the D-Bus signal %s",
                   G_OBJECT_TYPE_NAME (face->skeleton), name, info->name);
      return FALSE;
    }
    fwd = g_new0 (SignalForward, 1);
    fwd->face = face;
    fwd->info = info;
    closure = g_closure_new_simple (sizeof (GClosure), fwd);
    g_closure_add_finalize_notifier (closure, fwd, (GClosureNotify) (void (*)(void)) g_free);
    g_closure_set_marshal (closure, forward_signal_marshal);
    id = g_signal_connect_closure_by_id (face->skeleton, signal_id, 0, closure, FALSE);
    g_array_append_val (face->handlers, id);
  }
  return TRUE;
}

/* The skeleton batches nothing for us (it is not exported): collect the
 * names and send one PropertiesChanged per main loop turn, as it would. */
static gboolean
emit_changed_cb (gpointer user_data)
{
  Face *face = user_data;
  g_autoptr(GVariant) all = g_variant_take_ref (g_dbus_interface_skeleton_get_properties (face->skeleton));
  GVariantBuilder changed;
  GHashTableIter iter;
  gpointer name;

  face->changed_idle = 0;
  g_variant_builder_init (&changed, G_VARIANT_TYPE ("a{sv}"));
  g_hash_table_iter_init (&iter, face->changed);
  while (g_hash_table_iter_next (&iter, &name, NULL)) {
    g_autoptr(GVariant) value = g_variant_lookup_value (all, name, NULL);
    if (value != NULL)
      g_variant_builder_add (&changed, "{sv}", name, value);
  }
  g_hash_table_remove_all (face->changed);
  send_to_granted (face->self, vd_authority_read_action_for (face->info->name), face->path,
                   "org.freedesktop.DBus.Properties", "PropertiesChanged",
                   g_variant_new ("(sa{sv}as)", face->info->name, &changed, NULL));
  return G_SOURCE_REMOVE;
}

static void
notify_cb (GObject *object, GParamSpec *pspec, gpointer user_data)
{
  Face *face = user_data;
  const gchar *dbus_name = g_hash_table_lookup (face->prop_names, pspec->name);

  if (dbus_name == NULL)
    return;
  g_hash_table_add (face->changed, (gpointer) dbus_name);
  if (face->changed_idle == 0)
    face->changed_idle = g_idle_add (emit_changed_cb, face);
}

static gboolean
map_properties (Face *face, GError **error)
{
  GObjectClass *klass = G_OBJECT_GET_CLASS (face->skeleton);
  gulong id;

  for (guint i = 0; face->info->properties != NULL && face->info->properties[i] != NULL; i++) {
    const gchar *dbus_name = face->info->properties[i]->name;
    g_autofree gchar *name = codegen_name (dbus_name);
    GParamSpec *pspec = g_object_class_find_property (klass, name);

    if (pspec == NULL) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s has no GObject property “%s” for %s",
                   G_OBJECT_TYPE_NAME (face->skeleton), name, dbus_name);
      return FALSE;
    }
    g_hash_table_insert (face->prop_names, (gpointer) pspec->name, (gpointer) dbus_name);
  }
  id = g_signal_connect (face->skeleton, "notify", G_CALLBACK (notify_cb), face);
  g_array_append_val (face->handlers, id);
  return TRUE;
}

static Face *
face_new (VdExported *self, Node *node, GDBusInterfaceSkeleton *skeleton, GError **error)
{
  Face *face = g_new0 (Face, 1);

  face->self = self;
  face->skeleton = g_object_ref (skeleton);
  face->info = g_dbus_interface_info_ref (g_dbus_interface_skeleton_get_info (skeleton));
  face->path = node->path;
  face->prop_names = g_hash_table_new (g_str_hash, g_str_equal);
  face->changed = g_hash_table_new (g_str_hash, g_str_equal);
  face->handlers = g_array_new (FALSE, FALSE, sizeof (gulong));
  if (!connect_signals (face, error) || !map_properties (face, error)) {
    face_free (face);
    return NULL;
  }
  return face;
}

/* --- the tree ------------------------------------------------------------ */

/* The first face's read action decides whether a peer may see a node. */
static gboolean
may_see (VdExported *self, Node *node, const gchar *sender)
{
  Face *face = node->faces->len > 0 ? g_ptr_array_index (node->faces, 0) : NULL;

  return face != NULL && is_granted (self, sender, vd_authority_read_action_for (face->info->name));
}

static gchar **
subtree_enumerate (GDBusConnection *connection, const gchar *sender, const gchar *object_path, gpointer user_data)
{
  VdExported *self = VD_EXPORTED (user_data);
  g_autoptr(GStrvBuilder) children = g_strv_builder_new ();
  GHashTableIter iter;
  gpointer value;
  gsize prefix = strlen (object_path);

  g_hash_table_iter_init (&iter, self->nodes);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Node *node = value;
    if (strncmp (node->path, object_path, prefix) != 0 || node->path[prefix] != '/' ||
        strchr (node->path + prefix + 1, '/') != NULL || !may_see (self, node, sender))
      continue;
    g_strv_builder_add (children, node->path + prefix + 1);
  }
  return g_strv_builder_end (children);
}

static GDBusInterfaceInfo **
infos_of (Node *node)
{
  GPtrArray *infos = g_ptr_array_new ();

  for (guint i = 0; node != NULL && i < node->faces->len; i++) {
    Face *face = g_ptr_array_index (node->faces, i);
    g_ptr_array_add (infos, g_dbus_interface_info_ref (face->info));
  }
  g_ptr_array_add (infos, NULL);
  return (GDBusInterfaceInfo **) g_ptr_array_free (infos, FALSE);
}

/* Every interface of the contract, whatever is exported where. */
static GDBusInterfaceInfo **
contract_infos (void)
{
  GDBusInterfaceInfo *all[] = {
    vivarium_dbus_manager_interface_info (), vivarium_dbus_image_interface_info (),
    vivarium_dbus_session_interface_info (), vivarium_dbus_job_interface_info (),
    vivarium_dbus_project_interface_info (), vivarium_dbus_task_interface_info (),
    vivarium_dbus_report_interface_info (), vivarium_dbus_guard_interface_info (),
  };
  GDBusInterfaceInfo **infos = g_new0 (GDBusInterfaceInfo *, G_N_ELEMENTS (all) + 1);

  for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
    infos[i] = g_dbus_interface_info_ref (all[i]);
  return infos;
}

/* GDBus calls this two ways: for Introspect with (subtree root, last
 * component), and before dispatching a call with (the full path, last
 * component). Only the first is what a peer reads, so only it is filtered.
 * The second must answer for everyone and for every path: with the whole
 * contract, so that each call on a child, known or not, reaches
 * boundary_method_call, which refuses a stranger the same way either way
 * and tells an authorized caller NotFound; otherwise GDBus itself answers
 * "no such method" or, for Properties.Get/GetAll, "No such interface". */
static GDBusInterfaceInfo **
subtree_introspect (GDBusConnection *connection, const gchar *sender, const gchar *object_path,
                    const gchar *node_name, gpointer user_data)
{
  VdExported *self = VD_EXPORTED (user_data);
  g_autofree gchar *full = NULL;
  Node *node;

  if (node_name != NULL && !g_hash_table_contains (self->subtrees, object_path))
    return contract_infos ();
  if (node_name == NULL)
    return infos_of (g_hash_table_lookup (self->nodes, object_path));
  full = g_strconcat (object_path, "/", node_name, NULL);
  node = g_hash_table_lookup (self->nodes, full);
  if (node == NULL || !may_see (self, node, sender))
    return NULL;
  return infos_of (node);
}

static const GDBusInterfaceVTable *
subtree_dispatch (GDBusConnection *connection, const gchar *sender, const gchar *object_path,
                  const gchar *interface_name, const gchar *node, gpointer *out_user_data, gpointer user_data)
{
  *out_user_data = user_data;
  return &boundary_vtable;
}

static const GDBusSubtreeVTable subtree_vtable = {
  subtree_enumerate,
  subtree_introspect,
  subtree_dispatch,
  { NULL },
};

static gboolean
register_subtree (VdExported *self, const gchar *path, GError **error)
{
  guint id = g_dbus_connection_register_subtree (self->connection, path, &subtree_vtable,
                                                 G_DBUS_SUBTREE_FLAGS_DISPATCH_TO_UNENUMERATED_NODES,
                                                 self, NULL, error);

  if (id == 0)
    return FALSE;
  g_hash_table_insert (self->subtrees, g_strdup (path), GUINT_TO_POINTER (id));
  return TRUE;
}

/* A subtree path is remembered even off the bus, so that the next
 * connection serves it too. */
static gboolean
ensure_subtree (VdExported *self, const gchar *path, GError **error)
{
  if (g_hash_table_contains (self->subtrees, path))
    return TRUE;
  if (self->connection == NULL) {
    g_hash_table_insert (self->subtrees, g_strdup (path), GUINT_TO_POINTER (0));
    return TRUE;
  }
  return register_subtree (self, path, error);
}

/* --- calls ----------------------------------------------------------------- */

typedef struct {
  VdExported             *self;
  GDBusMethodInvocation  *invocation;
  GDBusInterfaceSkeleton *skeleton;        /* NULL: nothing there (see missing) */
  gchar                  *missing;         /* what NotFound says once polkit said yes */
  gchar                  *interface_name;  /* the target's, also for Properties */
  gchar                  *action;
  PolkitDetails          *details;
  gboolean                interactive;
} Call;

static void
call_free (Call *call)
{
  g_object_unref (call->self);
  g_clear_object (&call->invocation);
  g_clear_object (&call->skeleton);
  g_free (call->missing);
  g_free (call->interface_name);
  g_free (call->action);
  g_clear_object (&call->details);
  g_free (call);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Call, call_free)

static gchar *
bounded (const gchar *text)
{
  return vivarium_escape_untrusted (text, strlen (text), LOG_FIELD_MAX, NULL);
}

typedef struct {
  gchar *action;
  gchar *text;
} RefusalLog;

static void
refusal_uid_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  RefusalLog *log = user_data;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, NULL);
  g_autofree gchar *uid = NULL;
  guint32 value = G_MAXUINT32;

  if (reply != NULL)
    g_variant_get (reply, "(u)", &value);
  uid = value == G_MAXUINT32 ? g_strdup ("unknown") : g_strdup_printf ("%u", value);
  vd_log_action (G_LOG_LEVEL_INFO, log->action, uid, "%s (uid %s)", log->text, uid);
  g_free (log->action);
  g_free (log->text);
  g_free (log);
}

/* Names only, each capped: a refused call's arguments (up to the bus's
 * message size) never reach the journal. The uid is asked for without
 * blocking the loop. */
static void
log_refusal (GDBusMethodInvocation *invocation, const gchar *action, const gchar *member, const gchar *why)
{
  RefusalLog *log = g_new0 (RefusalLog, 1);
  g_autofree gchar *path = bounded (g_dbus_method_invocation_get_object_path (invocation));
  const gchar *sender = g_dbus_method_invocation_get_sender (invocation);

  log->action = g_strdup (action != NULL ? action : "unmapped");
  log->text = g_strdup_printf ("refused %s on %s for %s: %s", member, path, sender, why);
  g_dbus_connection_call (g_dbus_method_invocation_get_connection (invocation), "org.freedesktop.DBus",
                          "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
                          g_variant_new ("(s)", sender), G_VARIANT_TYPE ("(u)"), G_DBUS_CALL_FLAGS_NONE,
                          5000, NULL, refusal_uid_cb, log);
}

static void
refuse (GDBusMethodInvocation *invocation, const gchar *action, const gchar *member, const gchar *why)
{
  log_refusal (invocation, action, member, why);
  g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                                         "Not authorized to %s: %s", member, why);
}

static void
add_arg_details (PolkitDetails *details, GDBusMethodInvocation *invocation)
{
  const GDBusMethodInfo *info = g_dbus_method_invocation_get_method_info (invocation);
  GVariant *params = g_dbus_method_invocation_get_parameters (invocation);

  for (guint i = 0; info != NULL && info->in_args != NULL && info->in_args[i] != NULL; i++) {
    g_autoptr(GVariant) arg = g_variant_get_child_value (params, i);
    g_autofree gchar *key = g_strconcat ("vivarium.", info->in_args[i]->name, NULL);
    const gchar *text = NULL;
    g_autofree gchar *safe = NULL;

    if (g_variant_is_of_type (arg, G_VARIANT_TYPE_STRING))
      text = g_variant_get_string (arg, NULL);
    else if (g_variant_is_of_type (arg, G_VARIANT_TYPE_STRING_ARRAY) && g_variant_n_children (arg) > 0)
      g_variant_get_child (arg, 0, "&s", &text);
    if (text == NULL)
      continue;
    safe = vivarium_escape_untrusted (text, strlen (text), DETAIL_MAX, NULL);
    polkit_details_insert (details, key, safe);
  }
}

/* What a password prompt can show: which object (by its id: the session
 * id, the image name), which verb, and the verb's string arguments (an
 * image name, argv[0] of a command), each escaped and capped. Derived from
 * the interface description, so it holds for every verb without code. */
static PolkitDetails *
details_for (GDBusMethodInvocation *invocation, const gchar *interface_name)
{
  PolkitDetails *details = polkit_details_new ();
  const gchar *path = g_dbus_method_invocation_get_object_path (invocation);
  const gchar *last = strrchr (path, '/');
  g_autofree gchar *id = NULL;
  g_autofree gchar *safe_path = bounded (path);

  polkit_details_insert (details, "vivarium.interface", interface_name);
  polkit_details_insert (details, "vivarium.method", g_dbus_method_invocation_get_method_name (invocation));
  polkit_details_insert (details, "vivarium.object", safe_path);
  if (g_str_has_prefix (path, VIVARIUM_DBUS_PATH "/") && last != NULL) {
    g_autofree guint8 *raw = g_dbus_unescape_object_path (last + 1);
    if (raw != NULL) {
      id = vivarium_escape_untrusted ((const gchar *) raw, strlen ((const gchar *) raw), DETAIL_MAX, NULL);
      polkit_details_insert (details, "vivarium.id", id);
    }
  }
  add_arg_details (details, invocation);
  return details;
}

static void forward_after_read_checks (VdExported *self, const gchar *sender, Call *call);

static void
forward (Call *call)
{
  GDBusInterfaceVTable *vtable = NULL;
  GDBusMethodInvocation *invocation = g_steal_pointer (&call->invocation);
  const gchar *method = g_dbus_method_invocation_get_method_name (invocation);
  GVariant *params = g_dbus_method_invocation_get_parameters (invocation);
  GError *error = NULL;

  if (is_stale (call->self, g_dbus_method_invocation_get_connection (invocation))) {
    /* Its caller left with the old bus; the answer goes nowhere. */
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                           "The daemon lost the bus while this call was being authorized");
    return;
  }
  if (call->missing != NULL) {
    g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                                                   call->missing);
    return;
  }
  vtable = g_dbus_interface_skeleton_get_vtable (call->skeleton);
  if (g_strcmp0 (g_dbus_method_invocation_get_interface_name (invocation), "org.freedesktop.DBus.Properties") != 0) {
    vtable->method_call (g_dbus_method_invocation_get_connection (invocation),
                         g_dbus_method_invocation_get_sender (invocation),
                         g_dbus_method_invocation_get_object_path (invocation),
                         call->interface_name, method, params, invocation, call->skeleton);
  } else if (g_strcmp0 (method, "Get") == 0) {
    const gchar *property;
    g_autoptr(GVariant) value = NULL;

    g_variant_get (params, "(&s&s)", NULL, &property);
    value = vtable->get_property (g_dbus_method_invocation_get_connection (invocation),
                                  g_dbus_method_invocation_get_sender (invocation),
                                  g_dbus_method_invocation_get_object_path (invocation),
                                  call->interface_name, property, &error, call->skeleton);
    if (value == NULL) {
      vivarium_error_convert (&error);
      g_dbus_method_invocation_take_error (invocation, error);
    } else {
      g_dbus_method_invocation_return_value (invocation, g_variant_new ("(v)", value));
    }
  } else {
    g_autoptr(GVariant) all = g_variant_take_ref (g_dbus_interface_skeleton_get_properties (call->skeleton));
    g_dbus_method_invocation_return_value (invocation, g_variant_new ("(@a{sv})", all));
  }
}

static void
call_checked_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  const gchar *sender = g_dbus_method_invocation_get_sender (call->invocation);
  const gchar *method = g_dbus_method_invocation_get_method_name (call->invocation);
  g_autoptr(GError) error = NULL;
  Call *owned;

  if (is_stale (call->self, g_dbus_method_invocation_get_connection (call->invocation))) {
    forward (call);   /* answers the dead connection, runs nothing */
    return;
  }
  if (!vd_authority_check_finish (VD_AUTHORITY (source), res, &error)) {
    g_autofree gchar *what = NULL;
    /* Not asked yet (too many of its calls wait for polkit): no answer
     * about its rights, so none is changed, and it may try again. */
    if (g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY)) {
      g_dbus_method_invocation_return_gerror (g_steal_pointer (&call->invocation), error);
      return;
    }
    if (g_strcmp0 (g_dbus_method_invocation_get_interface_name (call->invocation),
                   "org.freedesktop.DBus.Properties") == 0)
      what = g_strdup_printf ("read %s", call->interface_name);
    revoke_action (call->self, sender, call->action);
    refuse (g_steal_pointer (&call->invocation), call->action, what != NULL ? what : method, error->message);
    return;
  }
  grant_action (call->self, sender, call->action);
  owned = g_steal_pointer (&call);
  forward_after_read_checks (owned->self, sender, owned);
}

/* Which interface a call is about, and what polkit must allow for it. */
static const gchar *
target_of (GDBusMethodInvocation *invocation, const gchar **interface_name, const gchar **why)
{
  const gchar *iface = g_dbus_method_invocation_get_interface_name (invocation);
  const gchar *method = g_dbus_method_invocation_get_method_name (invocation);
  GVariant *params = g_dbus_method_invocation_get_parameters (invocation);

  if (g_strcmp0 (iface, "org.freedesktop.DBus.Properties") != 0) {
    *interface_name = iface;
    *why = "this method is not mapped to a polkit action";
    return vd_authority_action_for (iface, method);
  }
  g_variant_get_child (params, 0, "&s", interface_name);
  *why = "no property can be changed over the bus";
  if (g_strcmp0 (method, "Set") == 0)
    return NULL;
  *why = "reading this interface is not mapped to a polkit action";
  return vd_authority_read_action_for (*interface_name);
}

static void
ask_polkit (Call *call)
{
  vd_authority_check_async (call->self->authority, g_dbus_method_invocation_get_sender (call->invocation),
                            call->action, call->details, call->interactive, call_checked_cb, call);
}

/* A task's worker is judged by its grants alone: admitted for exactly its
 * own session's and task's verbs, from its own unit's processes, with no
 * read checks (it gets no signals), refused everything else, and polkit is
 * never asked about it. The bus tells the caller's uid and pid. */
static void
caller_credentials_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, NULL);
  g_autoptr(GVariant) credentials = NULL;
  GDBusMethodInvocation *invocation = call->invocation;
  guint32 uid = G_MAXUINT32, pid = 0;
  gboolean allowed = FALSE;

  if (reply != NULL)
    credentials = g_variant_get_child_value (reply, 0);
  if (credentials == NULL || !g_variant_lookup (credentials, "UnixUserID", "u", &uid)) {
    refuse (g_steal_pointer (&call->invocation), call->action,
            g_dbus_method_invocation_get_method_name (invocation), "the caller's uid is unknown");
    return;
  }
  g_variant_lookup (credentials, "ProcessID", "u", &pid);
  if (!vd_authority_judge_worker (call->self->authority, uid, pid,
                                  g_dbus_method_invocation_get_interface_name (invocation),
                                  g_dbus_method_invocation_get_method_name (invocation),
                                  g_dbus_method_invocation_get_object_path (invocation), &allowed)) {
    ask_polkit (g_steal_pointer (&call));
    return;
  }
  if (!allowed) {
    refuse (g_steal_pointer (&call->invocation), call->action, g_dbus_method_invocation_get_method_name (invocation),
            "a task's worker may only act through its own task, from its own unit");
    return;
  }
  forward (call);
}

static void
boundary_method_call (GDBusConnection *connection, const gchar *sender, const gchar *object_path,
                      const gchar *interface_name, const gchar *method_name, GVariant *parameters,
                      GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdExported *self = VD_EXPORTED (user_data);
  Node *node = g_hash_table_lookup (self->nodes, object_path);
  const gchar *target = NULL, *why = NULL, *action;
  GDBusMessageFlags flags = g_dbus_message_get_flags (g_dbus_method_invocation_get_message (invocation));
  Face *face;
  Call *call;

  action = target_of (invocation, &target, &why);
  face = find_face (node, target);
  if (action == NULL) {
    refuse (invocation, NULL, method_name, why);
    return;
  }
  call = g_new0 (Call, 1);
  call->self = g_object_ref (self);
  call->invocation = invocation;
  /* Nothing there is said only to whom polkit allows the verb: a stranger
   * is refused as on a path that exists, and learns nothing. */
  if (face != NULL) {
    call->skeleton = g_object_ref (face->skeleton);
  } else {
    g_autofree gchar *path = bounded (object_path);
    g_autofree gchar *name = bounded (target);
    call->missing = node == NULL ? g_strdup_printf ("There is no object at %s", path)
                                 : g_strdup_printf ("The object at %s has no interface %s", path, name);
  }
  call->interface_name = g_strdup (target);
  call->action = g_strdup (action);
  call->details = details_for (invocation, target);
  call->interactive = (flags & G_DBUS_MESSAGE_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION) != 0;
  if (!vd_authority_has_workers (self->authority)) {
    ask_polkit (call);
    return;
  }
  g_dbus_connection_call (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                          "GetConnectionCredentials", g_variant_new ("(s)", sender), G_VARIANT_TYPE ("(a{sv})"),
                          G_DBUS_CALL_FLAGS_NONE, 5000, NULL, caller_credentials_cb, call);
}

static const GDBusInterfaceVTable boundary_vtable = {
  boundary_method_call,
  NULL,   /* Properties.Get/GetAll come to boundary_method_call, to be authorized */
  NULL,
  { NULL },
};

/* --- read checks after a peer's first authorized call --------------------- */

/* The call waits for them: a client that starts a session must hear the
 * SessionAdded its own call causes, so its read permissions are settled
 * before the call runs. Each is asked at most once per peer. */
struct _Gate {
  Call  *call;
  guint  remaining;
};

typedef struct {
  VdExported      *self;
  GDBusConnection *connection;   /* the peer's */
  gchar           *peer;
  gchar           *action;
  gchar           *key;
  Gate            *gate;   /* NULL: nobody waits */
} ReadCheck;

static void
gate_pass (Gate *gate)
{
  if (--gate->remaining > 0)
    return;
  forward (gate->call);
  call_free (gate->call);
  g_free (gate);
}

static void
read_checked_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  ReadCheck *check = user_data;

  /* A "no" stays in pending: the peer is not asked again in the background
   * (an explicit call of that action still can be allowed); a grant it had
   * ends now. */
  if (vd_authority_check_finish (VD_AUTHORITY (source), res, NULL) && !is_stale (check->self, check->connection)) {
    grant_action (check->self, check->peer, check->action);
    g_hash_table_remove (check->self->pending, check->key);
  } else if (!is_stale (check->self, check->connection)) {
    revoke_action (check->self, check->peer, check->action);
  }
  if (check->gate != NULL)
    gate_pass (check->gate);
  g_object_unref (check->self);
  g_clear_object (&check->connection);
  g_free (check->peer);
  g_free (check->action);
  g_free (check->key);
  g_free (check);
}

static void
start_read_check (VdExported *self, const gchar *sender, const gchar *action, Gate *gate)
{
  g_autoptr(PolkitDetails) details = polkit_details_new ();
  ReadCheck *check = g_new0 (ReadCheck, 1);

  check->self = g_object_ref (self);
  check->connection = g_object_ref (self->connection);
  check->peer = g_strdup (sender);
  check->action = g_strdup (action);
  check->key = g_strconcat (sender, " ", action, NULL);
  check->gate = gate;
  g_hash_table_add (self->pending, g_strdup (check->key));
  polkit_details_insert (details, "vivarium.method", "(signals)");
  if (gate != NULL)
    gate->remaining++;
  vd_authority_check_async (self->authority, sender, action, details, FALSE, read_checked_cb, check);
}

/* Runs @call when the read actions the peer was never asked about are
 * decided. */
static void
forward_after_read_checks (VdExported *self, const gchar *sender, Call *call)
{
  gsize n_rows;
  const VdActionRow *rows = vd_authority_get_action_map (&n_rows);
  Gate *gate = g_new0 (Gate, 1);

  gate->call = call;
  gate->remaining = 1;   /* held until every check is started */
  for (gsize i = 0; i < n_rows; i++) {
    g_autofree gchar *key = g_strconcat (sender, " ", rows[i].action, NULL);
    if (rows[i].kind == VD_ACTION_ROW_METHOD || is_granted (self, sender, rows[i].action) ||
        g_hash_table_contains (self->pending, key))
      continue;
    start_read_check (self, sender, rows[i].action, gate);
  }
  gate_pass (gate);
}

/* --- Introspect below the manager, authorized ------------------------------- */

/* GDBus answers Introspect itself, from a synchronous callback that cannot
 * wait for polkit; a peer's first look at a child would then depend on
 * whether it happened to be allowed something earlier (and `gdbus call`,
 * which introspects to type its arguments, would send the wrong types).
 * So Introspect of every path below the manager's is taken off GDBus's
 * hands in the worker thread and answered here after a read check. */

typedef struct {
  VdExported      *self;
  GDBusConnection *connection;   /* the one the message came on */
  GDBusMessage    *message;
  gchar           *action;
} Look;

static void
look_free (Look *look)
{
  g_object_unref (look->self);
  g_object_unref (look->connection);
  g_object_unref (look->message);
  g_free (look->action);
  g_free (look);
}

static void
append_children (VdExported *self, GString *xml, const gchar *path)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;
  gsize prefix = strlen (path);

  g_hash_table_iter_init (&iter, self->nodes);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Node *node = value;
    if (strncmp (node->path, path, prefix) == 0 && node->path[prefix] == '/' &&
        strchr (node->path + prefix + 1, '/') == NULL)
      g_ptr_array_add (names, node->path + prefix + 1);
  }
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  for (guint i = 0; i < names->len; i++)
    g_string_append_printf (xml, "  <node name=\"%s\"/>\n", (const gchar *) g_ptr_array_index (names, i));
}

/* @allowed FALSE: the same answer as for a path where nothing is. */
static void
answer_look (Look *look, gboolean allowed)
{
  const gchar *path = g_dbus_message_get_path (look->message);
  Node *node = g_hash_table_lookup (look->self->nodes, path);
  g_autoptr(GString) xml = g_string_new (INTROSPECT_DOCTYPE "<node>\n");
  g_autoptr(GDBusMessage) reply = g_dbus_message_new_method_reply (look->message);

  if (allowed && node != NULL) {
    for (guint i = 0; i < node->faces->len; i++)
      g_dbus_interface_info_generate_xml (((Face *) g_ptr_array_index (node->faces, i))->info, 2, xml);
  } else if (allowed) {
    append_children (look->self, xml, path);
  }
  g_string_append (xml, "</node>\n");
  g_dbus_message_set_body (reply, g_variant_new ("(s)", xml->str));
  g_dbus_connection_send_message (look->connection, reply, G_DBUS_SEND_MESSAGE_FLAGS_NONE, NULL, NULL);
}

static void
look_checked_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Look *look = user_data;
  const gchar *sender = g_dbus_message_get_sender (look->message);
  gboolean allowed = vd_authority_check_finish (VD_AUTHORITY (source), res, NULL);

  if (is_stale (look->self, look->connection))
    allowed = FALSE;   /* a peer of the old bus: its name means someone else now */
  else if (allowed)
    grant_action (look->self, sender, look->action);
  else
    revoke_action (look->self, sender, look->action);
  answer_look (look, allowed);
  look_free (look);
}

/* A child is read with its first interface's action; a collection's list
 * with the manager's, which is what listing the collection needs. */
static const gchar *
look_action (VdExported *self, const gchar *path)
{
  Node *node = g_hash_table_lookup (self->nodes, path);
  Face *face = node != NULL && node->faces->len > 0 ? g_ptr_array_index (node->faces, 0) : NULL;

  if (face != NULL)
    return vd_authority_read_action_for (face->info->name);
  if (g_hash_table_contains (self->subtrees, path))
    return vd_authority_read_action_for (VIVARIUM_DBUS_IFACE_PREFIX ".Manager");
  return NULL;
}

static gboolean
look_cb (gpointer user_data)
{
  Look *look = user_data;
  const gchar *path = g_dbus_message_get_path (look->message);
  const gchar *action = look_action (look->self, path);
  g_autoptr(PolkitDetails) details = polkit_details_new ();
  g_autofree gchar *safe_path = bounded (path);

  if (action == NULL) {
    answer_look (look, FALSE);
    look_free (look);
    return G_SOURCE_REMOVE;
  }
  look->action = g_strdup (action);
  polkit_details_insert (details, "vivarium.method", "Introspect");
  polkit_details_insert (details, "vivarium.object", safe_path);
  vd_authority_check_async (look->self->authority, g_dbus_message_get_sender (look->message), action, details,
                            FALSE, look_checked_cb, look);
  return G_SOURCE_REMOVE;
}

static gboolean
is_look_below_manager (GDBusMessage *message)
{
  return g_dbus_message_get_message_type (message) == G_DBUS_MESSAGE_TYPE_METHOD_CALL &&
         g_strcmp0 (g_dbus_message_get_interface (message), "org.freedesktop.DBus.Introspectable") == 0 &&
         g_strcmp0 (g_dbus_message_get_member (message), "Introspect") == 0 &&
         g_str_has_prefix (g_dbus_message_get_path (message), VIVARIUM_DBUS_PATH "/") &&
         g_dbus_message_get_sender (message) != NULL;
}

/* A filter may still be running in GDBus's worker thread after it was
 * removed, so it reaches us only through a weak reference. */
typedef struct {
  GWeakRef      self;
  GMainContext *context;
} FilterData;

static void
filter_data_free (gpointer data)
{
  FilterData *fd = data;

  g_weak_ref_clear (&fd->self);
  g_main_context_unref (fd->context);
  g_free (fd);
}

/* Runs in GDBus's worker thread: touches nothing of ours but the message
 * and, through the weak reference, a strong one handed to the main context. */
static GDBusMessage *
message_filter (GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer user_data)
{
  FilterData *fd = user_data;
  Look *look;

  if (!incoming)
    return vd_outgoing_check (message);
  if (!is_look_below_manager (message))
    return message;
  look = g_new0 (Look, 1);
  look->self = g_weak_ref_get (&fd->self);
  if (look->self == NULL) {
    g_free (look);
    return message;   /* shutting down: GDBus answers as it would */
  }
  look->connection = g_object_ref (connection);
  look->message = message;   /* ours now: GDBus will not see it */
  g_main_context_invoke (fd->context, look_cb, look);
  return NULL;
}

/* --- life cycle ------------------------------------------------------------ */

/* Takes the tree, the NameOwnerChanged subscription and the filter off the
 * connection; the registry of nodes and subtree paths stays, to be served
 * again on the next one. */
static void
detach (VdExported *self)
{
  GHashTableIter iter;
  gpointer id;

  if (self->connection == NULL)
    return;
  g_hash_table_iter_init (&iter, self->subtrees);
  while (g_hash_table_iter_next (&iter, NULL, &id)) {
    if (GPOINTER_TO_UINT (id) != 0)
      g_dbus_connection_unregister_subtree (self->connection, GPOINTER_TO_UINT (id));
    g_hash_table_iter_replace (&iter, GUINT_TO_POINTER (0));
  }
  if (self->owner_changed_id != 0)
    g_dbus_connection_signal_unsubscribe (self->connection, self->owner_changed_id);
  if (self->filter_id != 0)
    g_dbus_connection_remove_filter (self->connection, self->filter_id);
  self->owner_changed_id = 0;
  self->filter_id = 0;
  g_clear_object (&self->connection);
}

static gboolean register_subtree (VdExported *self, const gchar *path, GError **error);

static gboolean
attach (VdExported *self, GDBusConnection *connection, GError **error)
{
  g_autofree gpointer *paths = NULL;
  guint n_paths = 0;
  FilterData *filter_data;

  self->connection = g_object_ref (connection);
  self->owner_changed_id = g_dbus_connection_signal_subscribe (connection, "org.freedesktop.DBus",
                                                               "org.freedesktop.DBus", "NameOwnerChanged",
                                                               "/org/freedesktop/DBus", NULL,
                                                               G_DBUS_SIGNAL_FLAGS_NONE,
                                                               name_owner_changed_cb, self, NULL);
  filter_data = g_new0 (FilterData, 1);
  g_weak_ref_init (&filter_data->self, self);
  filter_data->context = g_main_context_ref (self->context);
  self->filter_id = g_dbus_connection_add_filter (connection, message_filter, filter_data, filter_data_free);
  /* The keys stay valid: registering only replaces their values. */
  paths = g_hash_table_get_keys_as_array (self->subtrees, &n_paths);
  for (guint i = 0; i < n_paths; i++) {
    if (!register_subtree (self, paths[i], error))
      return FALSE;
  }
  return TRUE;
}

static void
vd_exported_dispose (GObject *object)
{
  VdExported *self = VD_EXPORTED (object);

  g_clear_handle_id (&self->refresh_id, g_source_remove);
  detach (self);
  g_hash_table_remove_all (self->subtrees);
  g_hash_table_remove_all (self->nodes);
  G_OBJECT_CLASS (vd_exported_parent_class)->dispose (object);
}

static void
vd_exported_finalize (GObject *object)
{
  VdExported *self = VD_EXPORTED (object);

  g_hash_table_unref (self->nodes);
  g_hash_table_unref (self->subtrees);
  g_hash_table_unref (self->grants);
  g_hash_table_unref (self->pending);
  g_clear_object (&self->authority);
  g_clear_object (&self->connection);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (vd_exported_parent_class)->finalize (object);
}

static void
vd_exported_class_init (VdExportedClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = vd_exported_dispose;
  G_OBJECT_CLASS (klass)->finalize = vd_exported_finalize;
}

static void
vd_exported_init (VdExported *self)
{
  self->nodes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) node_free);
  self->subtrees = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->grants = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_hash_table_unref);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->context = g_main_context_ref_thread_default ();
}

/* The manager's path is served from the start, so that any path under it
 * that names nothing answers NotFound rather than GDBus's UnknownMethod. */
static void
schedule_refresh (VdExported *self)
{
  g_clear_handle_id (&self->refresh_id, g_source_remove);
  /* A quarter of the lifetime: a grant is re-asked between its halfway
   * point and three quarters of it, with time left for polkit to answer. */
  self->refresh_id = g_timeout_add_seconds (MAX (self->grant_us / G_USEC_PER_SEC / 4, 1), refresh_grants_cb, self);
}

VdExported *
vd_exported_new (VdAuthority *authority, GDBusConnection *connection)
{
  const gchar *collections[] = { VIVARIUM_DBUS_PATH_SESSIONS, VIVARIUM_DBUS_PATH_IMAGES, VIVARIUM_DBUS_PATH_PROJECTS,
                                 VIVARIUM_DBUS_PATH_TASKS, VIVARIUM_DBUS_PATH_REPORTS, VIVARIUM_DBUS_PATH_JOBS };
  VdExported *self = g_object_new (VD_TYPE_EXPORTED, NULL);
  g_autoptr(GError) error = NULL;

  self->authority = g_object_ref (authority);
  self->grant_us = (gint64) VIVARIUM_READ_GRANT_SEC * G_USEC_PER_SEC;
  schedule_refresh (self);
  g_hash_table_insert (self->subtrees, g_strdup (VIVARIUM_DBUS_PATH), GUINT_TO_POINTER (0));
  /* And every collection, so that an unknown child answers the same before
   * the collection's first object as after it. */
  for (gsize i = 0; i < G_N_ELEMENTS (collections); i++)
    g_hash_table_insert (self->subtrees, g_strdup (collections[i]), GUINT_TO_POINTER (0));
  if (!attach (self, connection, &error))
    g_critical ("cannot serve %s: %s", VIVARIUM_DBUS_PATH, error->message);
  return self;
}

void
vd_exported_set_read_grant_sec (VdExported *self, guint seconds)
{
  self->grant_us = (gint64) MAX (seconds, 2) * G_USEC_PER_SEC;
  schedule_refresh (self);
}

/* After the daemon lost the bus: every object and filter goes onto
 * @connection (NULL: off the bus until the next call), and every peer
 * must be authorized anew. */
gboolean
vd_exported_set_connection (VdExported *self, GDBusConnection *connection, GError **error)
{
  if (connection == self->connection)
    return TRUE;
  detach (self);
  g_hash_table_remove_all (self->grants);
  g_hash_table_remove_all (self->pending);
  if (connection == NULL)
    return TRUE;
  return attach (self, connection, error);
}

/* Where an object may live: the manager's path, or directly in a
 * collection under it (/org/vivarium/Vivarium1/sessions/<id>). */
static gchar *
subtree_for (const gchar *path, GError **error)
{
  const gchar *rest;

  if (g_strcmp0 (path, VIVARIUM_DBUS_PATH) == 0)
    return g_strdup (path);
  rest = g_str_has_prefix (path, VIVARIUM_DBUS_PATH "/") ? path + strlen (VIVARIUM_DBUS_PATH "/") : NULL;
  if (rest == NULL || !g_variant_is_object_path (path) || strchr (rest, '/') == NULL ||
      strchr (strchr (rest, '/') + 1, '/') != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "%s is not a place for an object of the daemon", path);
    return NULL;
  }
  return g_strndup (path, strrchr (path, '/') - path);
}

/* The only way onto the bus. An interface whose reading the bouncer does
 * not map cannot be exported at all; its methods are checked one by one
 * against the map when they are called, and refused when unmapped. */
gboolean
vd_exported_add (VdExported *self, const gchar *path, GDBusInterfaceSkeleton *skeleton, GError **error)
{
  const gchar *interface_name = g_dbus_interface_skeleton_get_info (skeleton)->name;
  g_autofree gchar *subtree = subtree_for (path, error);
  Node *node;
  Face *face;

  if (subtree == NULL)
    return FALSE;
  if (vd_authority_read_action_for (interface_name) == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The interface %s has no read action in the authority's map; it cannot be exported",
                 interface_name);
    return FALSE;
  }
  node = g_hash_table_lookup (self->nodes, path);
  if (find_face (node, interface_name) != NULL)
    return TRUE;   /* already there: adding twice is harmless */
  if (!ensure_subtree (self, subtree, error))
    return FALSE;
  if (node == NULL) {
    node = g_new0 (Node, 1);
    node->path = g_strdup (path);
    node->faces = g_ptr_array_new_with_free_func ((GDestroyNotify) face_free);
    g_hash_table_insert (self->nodes, node->path, node);
  }
  face = face_new (self, node, skeleton, error);
  if (face == NULL) {
    if (node->faces->len == 0)
      g_hash_table_remove (self->nodes, path);
    return FALSE;
  }
  g_ptr_array_add (node->faces, face);
  return TRUE;
}

/* Calls already authorized keep their skeleton; new ones get NotFound. */
void
vd_exported_remove (VdExported *self, const gchar *path)
{
  g_hash_table_remove (self->nodes, path);
}

gboolean
vd_exported_has (VdExported *self, const gchar *path)
{
  return g_hash_table_contains (self->nodes, path);
}
