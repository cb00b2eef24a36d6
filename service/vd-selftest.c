/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSelfTest"

#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <json-glib/json-glib.h>
#include <glib/gstdio.h>

#include "vivarium-names.h"

#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vd-canary.h"
#include "vd-guard.h"
#include "vd-image.h"
#include "vd-progress.h"
#include "vd-selftest.h"
#include "vd-selftest-egress.h"
#include "vd-session.h"
#include "vd-systemd.h"
#include "vivarium-dbus-generated.h"

#define PROBE_EXEC_TIMEOUT_SEC 90
/* After the guest's probes return, late datagrams may still be on their
 * way through QEMU; the canary is read once more after this. Not an
 * assertion on time: a late arrival only makes a "blocked" look worse. */
#define SETTLE_SEC 1
/* The proxy's end is seen through a pidfd at once; systemd's word on it
 * comes a moment later. Bounded, and the probe runs either way. */
#define EGRESS_FAILED_POLL_MS    100
#define EGRESS_FAILED_POLL_TRIES 100

/* What a phase probes, in order. An allowlist guest first asks its proxy
 * (whose allowed CONNECT is the phase's positive control: the direct one
 * must be blocked there), then asks its DNS alone (so that what the proxy
 * did meanwhile is the DNS questions' doing), then dials directly, then
 * asks again once the proxy has been killed. The proxy's and the direct
 * probes of the positive control hit the same listener, so they run apart.
 * A caller's live allowlist session is only asked its DNS (its policy is
 * not ours; its proxy is not killed), then dialled directly. */
typedef enum {
  STAGE_PROXY,
  STAGE_DNS,
  STAGE_DIRECT,
  STAGE_PROXY_KILLED,
  STAGE_DONE,
} Stage;

static const Stage open_stages[] = { STAGE_DIRECT, STAGE_DONE };
static const Stage allowlist_stages[] = { STAGE_PROXY, STAGE_DNS, STAGE_DIRECT, STAGE_PROXY_KILLED, STAGE_DONE };
static const Stage live_allowlist_stages[] = { STAGE_DNS, STAGE_DIRECT, STAGE_DONE };

typedef struct {
  const gchar *name;
  gboolean     layer1;
  gboolean     layer2;
  gboolean     allowlist;   /* egress allowlist: the closed network, the proxy the only way out */
  const Stage *stages;
} Configuration;

static const Configuration configurations[] = {
  { "both",        TRUE,  TRUE,  FALSE, open_stages },
  { "layer1-only", TRUE,  FALSE, FALSE, open_stages },
  { "layer2-only", FALSE, TRUE,  FALSE, open_stages },
  { "allowlist",   TRUE,  TRUE,  TRUE,  allowlist_stages },
  { "neither",     FALSE, FALSE, FALSE, open_stages },   /* the negative control, on request only */
};

/* Probing a caller's running session instead of scratch guests: it has both
 * layers, like every session StartSession makes, and it is not stopped. Its
 * egress mode decides what it must reach: an allowlist session nothing
 * directly, its proxy's DNS answering being the positive control. */
static const Configuration live_configuration = { "live-session", TRUE, TRUE, FALSE, open_stages };
static const Configuration live_allowlist_configuration = { "live-session", TRUE, TRUE, TRUE, live_allowlist_stages };

typedef struct {
  const gchar *name;
  const gchar *guest_address;    /* what the guest dials */
  const gchar *canary_address;   /* the listener that sees it */
  gboolean     expect_reached;
  gboolean     ipv6;
} Probe;

/* QEMU's user-mode stack maps the gateway (10.0.2.2, fec0::2) to the
 * host's loopback: that is how the guest could reach the host's own
 * services, so it is probed through the gateway. */
static const Probe probes[] = {
  { "host-loopback",       "10.0.2.2",           "127.0.0.1",          FALSE, FALSE },
  { "host-loopback-v6",    "fec0::2",            "::1",                FALSE, TRUE  },
  { "private-10",          "10.255.255.254",     "10.255.255.254",     FALSE, FALSE },
  { "private-172",         "172.31.255.254",     "172.31.255.254",     FALSE, FALSE },
  { "private-192",         "192.168.255.254",    "192.168.255.254",    FALSE, FALSE },
  { "shared-100",          "100.127.255.254",    "100.127.255.254",    FALSE, FALSE },
  { "link-local",          "169.254.255.254",    "169.254.255.254",    FALSE, FALSE },
  { "ula-v6",              "fd00::ffff:254",     "fd00::ffff:254",     FALSE, TRUE  },
  { "positive-control",    "198.51.100.1",       "198.51.100.1",       TRUE,  FALSE },
  { "positive-control-v6", "2001:db8:ffff::254", "2001:db8:ffff::254", TRUE,  TRUE  },
};

static const gchar *transports[] = { "tcp", "udp" };

#define UNLISTED_NAME "unlisted.selftest.vivarium.invalid"

/* Through the proxy, each to the canary's TCP port. The policy allows the
 * positive control's address and localhost (vd_self_test_egress_rules).
 * The unlisted IPv6 control address, the denied range and loopback have
 * listeners, so a proxy that let them through would be seen; the unlisted
 * name must be refused before any lookup. localhost is in /etc/hosts on
 * every host, as loopback, which the deny list always holds: allowed by
 * name, refused by address (the rebinding check). The ClientHello naming
 * another server follows an allowed CONNECT: the proxy reaches the canary
 * before it reads the hello, so the canary is no witness there; the cut
 * is the proxy's, and its reason says which check made it. */
static const VdSelfTestProxyProbe proxy_probes[] = {
  { "proxy-allowed", VD_SELF_TEST_ASK_CONNECT, "198.51.100.1", NULL, "198.51.100.1", "reached", "allowed by" },
  { "proxy-unlisted", VD_SELF_TEST_ASK_CONNECT, "[2001:db8:ffff::254]", NULL, "2001:db8:ffff::254", "refused", NULL },
  { "proxy-unlisted-name", VD_SELF_TEST_ASK_CONNECT, UNLISTED_NAME, NULL, NULL, "refused", NULL },
  { "proxy-denied-range", VD_SELF_TEST_ASK_CONNECT, "10.255.255.254", NULL, "10.255.255.254", "refused", NULL },
  { "proxy-resolves-denied", VD_SELF_TEST_ASK_CONNECT, "localhost", NULL, "127.0.0.1", "refused",
    "resolves only into denied ranges" },
  { "proxy-sni-mismatch", VD_SELF_TEST_ASK_HELLO, "198.51.100.1", "other.selftest.vivarium.invalid", NULL, "refused",
    "is not the CONNECT host" },
};
/* The proxy's DNS, alone in its stage: an allowed name answered (its
 * positive control), an unlisted one REFUSED without the proxy looking
 * anything up or sending a packet anywhere. */
static const VdSelfTestProxyProbe dns_probes[] = {
  { "dns-allowed", VD_SELF_TEST_ASK_DNS, "localhost", NULL, NULL, "answered", "the policy allows" },
  { "dns-unlisted", VD_SELF_TEST_ASK_DNS, UNLISTED_NAME, NULL, NULL, "refused", "answered REFUSED" },
};
/* A live session's policy is its own: only the unlisted name is asked. */
static const VdSelfTestProxyProbe live_dns_probe = { "dns-unlisted", VD_SELF_TEST_ASK_DNS, UNLISTED_NAME, NULL, NULL,
                                                     "refused", "answered REFUSED" };
/* The allowed CONNECT again, the proxy killed: nothing may answer it. */
static const VdSelfTestProxyProbe proxy_killed_probe = { "proxy-killed", VD_SELF_TEST_ASK_CONNECT, "198.51.100.1", NULL,
                                                         "198.51.100.1", "blocked", NULL };

/* What the proxy did during a stage: the names it looked up (its usage
 * file) and the packets its unit sent (systemd's IP accounting, the
 * kernel's count). -1: not known. */
typedef struct {
  gint64 lookups;
  gint64 packets;
} ProxyActivity;

/* Device nodes QEMU may hold open: /dev/kvm is the accelerator, and
 * /dev/null is where systemd points its stdin. Nothing else: QEMU gets its
 * randomness from getrandom(), and was seen holding no other node. */
static const gchar *allowed_devices[] = { "/dev/kvm", "/dev/null", NULL };

struct _VdSelfTest {
  GObject      parent_instance;
  VdSessionPool *pool;
  VdGuard     *guard;
  VdSystemd   *systemd;
  VdConfig    *config;
  gchar       *image;
  VdImage     *boot_image;     /* NULL when probing a live session */
  gboolean     negative_control;
  VdCanary    *canary;
  GTask       *task;
  guint        phase;
  guint        n_phases;
  VdProgress  *progress;       /* setup, one step per phase, teardown */
  guint        phase_step;     /* PhaseStep the phase's child is at */
  VdSession   *session;
  VdSession   *live_session;   /* set: probe it, boot nothing, stop nothing */
  const Configuration *live_config;
  guint        stage_index;    /* into the phase's stages */
  gboolean     proxy_control;  /* this phase's allowed CONNECT reached its canary (live: its DNS answered) */
  gboolean     counted_before; /* the proxy's counters were read before this stage */
  guint64      lookups_before;
  guint64      proxy_packets_before;
  ProxyActivity proxy_stage;   /* while the proxy's CONNECTs ran */
  ProxyActivity dns_stage;     /* while only its DNS was asked */
  gboolean     dns_control;    /* the allowed name was answered */
  guint        egress_polls;
  gint64       started_at;
  gint64       finished_at;
  gint64       phase_started_at;
  gchar       *image_digest;
  VivariumVerdict verdict;
  GHashTable  *guest_status;   /* "probe/transport" → exit status (GINT) */
  guint64      packets_before;
  guint64      bytes_before;
  gboolean     counters_before;
  gchar       *phase_error;
  JsonArray   *rows;
  JsonArray   *host_checks;
  JsonArray   *phases;
};

G_DEFINE_TYPE (VdSelfTest, vd_self_test, G_TYPE_OBJECT)

enum { SIGNAL_PROGRESS, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_self_test_finalize (GObject *object)
{
  VdSelfTest *self = VD_SELF_TEST (object);

  g_clear_object (&self->canary);
  g_clear_object (&self->progress);
  g_clear_object (&self->session);
  g_clear_object (&self->live_session);
  g_clear_object (&self->config);
  g_clear_object (&self->pool);
  g_clear_object (&self->guard);
  g_clear_object (&self->systemd);
  g_clear_object (&self->boot_image);
  g_free (self->image);
  g_free (self->image_digest);
  g_free (self->phase_error);
  g_hash_table_unref (self->guest_status);
  json_array_unref (self->rows);
  json_array_unref (self->host_checks);
  json_array_unref (self->phases);
  G_OBJECT_CLASS (vd_self_test_parent_class)->finalize (object);
}

static void
vd_self_test_class_init (VdSelfTestClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_self_test_finalize;
  signals[SIGNAL_PROGRESS] = g_signal_new ("progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                           NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_STRING);
}

static void
vd_self_test_init (VdSelfTest *self)
{
  self->guest_status = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->rows = json_array_new ();
  self->host_checks = json_array_new ();
  self->phases = json_array_new ();
  self->proxy_stage = self->dns_stage = (ProxyActivity) { -1, -1 };
}

VdSelfTest *
vd_self_test_new (VdSessionPool *pool, VdGuard *guard, VdSystemd *systemd, VdConfig *config,
                  const gchar *image_name, VdImage *image, gboolean negative_control)
{
  VdSelfTest *self = g_object_new (VD_TYPE_SELF_TEST, NULL);

  self->pool = g_object_ref (pool);
  self->guard = g_object_ref (guard);
  self->systemd = g_object_ref (systemd);
  self->config = g_object_ref (config);
  self->image = g_strdup (image_name);
  self->boot_image = image != NULL ? g_object_ref (image) : NULL;
  self->negative_control = negative_control;
  self->n_phases = negative_control ? G_N_ELEMENTS (configurations) : G_N_ELEMENTS (configurations) - 1;
  return self;
}

/* Must be called before vd_self_test_run_async(). */
void
vd_self_test_set_live_session (VdSelfTest *self, VdSession *session)
{
  const gchar *mode = vivarium_dbus_session_get_egress_mode (VIVARIUM_DBUS_SESSION (vd_session_get_skeleton (session)));

  g_set_object (&self->live_session, session);
  self->live_config = g_strcmp0 (mode, "allowlist") == 0 ? &live_allowlist_configuration : &live_configuration;
  self->n_phases = 1;
}

VivariumVerdict vd_self_test_get_verdict (VdSelfTest *self) { return self->verdict; }
gint64 vd_self_test_get_finished_at (VdSelfTest *self) { return self->finished_at; }

static gchar *
format_time (gint64 usec)
{
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc (usec / G_USEC_PER_SEC);
  g_autoptr(GDateTime) precise = g_date_time_add (dt, usec % G_USEC_PER_SEC);

  return g_date_time_format_iso8601 (precise);
}

static const Configuration *
current (VdSelfTest *self)
{
  if (self->live_session != NULL)
    return self->live_config;
  return &configurations[self->phase];
}

static Stage
current_stage (VdSelfTest *self)
{
  return current (self)->stages[self->stage_index];
}

static const gchar *
current_name (VdSelfTest *self, guint phase)
{
  return self->live_session != NULL ? self->live_config->name : configurations[phase].name;
}

/* Each phase's steps, weighted roughly as their time under TCG: the boot
 * and the probes (timeouts for the blocked ones) dominate. */
typedef enum {
  PHASE_STEP_BOOT,
  PHASE_STEP_HOST_CHECKS,
  PHASE_STEP_PROBE,
  PHASE_STEP_STOP,
} PhaseStep;

static const struct { const gchar *name; guint weight; } phase_steps[] = {
  [PHASE_STEP_BOOT]        = { "booting a scratch guest", 5 },
  [PHASE_STEP_HOST_CHECKS] = { "checking the guest's process from the host", 1 },
  [PHASE_STEP_PROBE]       = { "probing the canaries from the guest", 3 },
  [PHASE_STEP_STOP]        = { "stopping the scratch session", 1 },
};

static void
progress_changed_cb (VdProgress *progress, gdouble fraction, const gchar *message, gpointer user_data)
{
  VdSelfTest *self = VD_SELF_TEST (user_data);

  g_signal_emit (self, signals[SIGNAL_PROGRESS], 0, vd_progress_get_percent (progress), message != NULL ? message : "");
}

/* Declared once per run: the steps a person sees, in order. */
static void
declare_steps (VdSelfTest *self)
{
  self->progress = vd_progress_new ();
  g_signal_connect (self->progress, "changed", G_CALLBACK (progress_changed_cb), self);
  vd_progress_add_step (self->progress, "setting up the canary network", 1);
  for (guint i = 0; i < self->n_phases; i++)
    vd_progress_add_step (self->progress, current_name (self, i), 10);
  vd_progress_add_step (self->progress, "removing the canary network", 1);
}

/* Moves the current phase's child on to @step (skipping what a failed
 * phase never reached) and says what runs now. */
static void
phase_progress (VdSelfTest *self, PhaseStep step, const gchar *message)
{
  VdProgress *child = vd_progress_get_child (self->progress);

  if (vd_progress_get_n_steps (child) == 0) {
    for (guint i = 0; i < G_N_ELEMENTS (phase_steps); i++)
      vd_progress_add_step (child, phase_steps[i].name, phase_steps[i].weight);
    self->phase_step = PHASE_STEP_BOOT;
  }
  for (; self->phase_step < step; self->phase_step++)
    vd_progress_step_done (child);
  vd_progress_set_message (child, message);
}

VdProgress *vd_self_test_get_progress (VdSelfTest *self) { return self->progress; }


/* --- host-side checks -------------------------------------------------- */

static void
add_host_check (VdSelfTest *self, const gchar *check, const gchar *expected, const gchar *observed, gboolean pass)
{
  JsonObject *obj = json_object_new ();

  json_object_set_string_member (obj, "check", check);
  json_object_set_string_member (obj, "configuration", self->phase < self->n_phases ? current (self)->name : "run");
  json_object_set_string_member (obj, "expected", expected);
  json_object_set_string_member (obj, "observed", observed);
  json_object_set_boolean_member (obj, "pass", pass);
  json_array_add_object_element (self->host_checks, obj);
}

static gchar *
status_field (const gchar *status, const gchar *field)
{
  g_auto(GStrv) lines = g_strsplit (status, "\n", -1);
  gsize len = strlen (field);

  for (guint i = 0; lines[i] != NULL; i++) {
    if (strncmp (lines[i], field, len) == 0 && lines[i][len] == ':')
      return g_strstrip (g_strdup (lines[i] + len + 1));
  }
  return NULL;
}

static void
check_process_status (VdSelfTest *self, guint32 pid, guint32 uid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%u/status", pid);
  g_autofree gchar *status = NULL;
  g_autofree gchar *uids = NULL;
  g_autofree gchar *seccomp = NULL;
  g_autofree gchar *want_uids = g_strdup_printf ("%u\t%u\t%u\t%u", uid, uid, uid, uid);
  g_autoptr(GError) error = NULL;

  if (!g_file_get_contents (path, &status, NULL, &error)) {
    add_host_check (self, "qemu-uid", want_uids, error->message, FALSE);
    add_host_check (self, "qemu-seccomp", "2", error->message, FALSE);
    return;
  }
  uids = status_field (status, "Uid");
  seccomp = status_field (status, "Seccomp");
  add_host_check (self, "qemu-uid", want_uids, uids != NULL ? uids : "?",
                  uid != 0 && g_strcmp0 (uids, want_uids) == 0);
  add_host_check (self, "qemu-seccomp", "2", seccomp != NULL ? seccomp : "?", g_strcmp0 (seccomp, "2") == 0);
}

/* Every open file of QEMU that is a device node must be one of the
 * allowed ones: the fds as the process really holds them, not the unit's
 * DevicePolicy as configured. Reading another uid's /proc/PID/fd takes
 * ptrace rights the daemon does not have (no CAP_SYS_PTRACE), so a
 * one-shot unit running as the session uid lists them into a file. */
static void
check_process_devices (VdSelfTest *self, const gchar *listing)
{
  g_auto(GStrv) targets = g_strsplit (listing, "\n", -1);
  g_autoptr(GString) seen = g_string_new (NULL);
  g_autofree gchar *allowed = g_strjoinv (",", (gchar **) allowed_devices);
  gboolean pass = TRUE;
  guint n_fds = 0;

  for (guint i = 0; targets[i] != NULL; i++) {
    if (targets[i][0] == '\0')
      continue;
    n_fds++;
    if (!g_str_has_prefix (targets[i], "/dev/") || strstr (seen->str, targets[i]) != NULL)
      continue;
    g_string_append_printf (seen, "%s%s", seen->len > 0 ? "," : "", targets[i]);
    pass = pass && g_strv_contains (allowed_devices, targets[i]);
  }
  /* QEMU always holds some fds (its disk, its sockets): an empty listing
   * means the listing failed, not that there is nothing to see. */
  if (n_fds == 0) {
    add_host_check (self, "qemu-devices", allowed, "the fd listing is empty", FALSE);
    return;
  }
  g_string_append_printf (seen, "%s(%u fds)", seen->len > 0 ? " " : "", n_fds);
  add_host_check (self, "qemu-devices", allowed, seen->str, pass);
}

static gchar *
fd_listing_path (VdSelfTest *self)
{
  return g_build_filename (vd_config_get_runtime_dir (self->config), "selftest-qemu-fds.txt", NULL);
}

static GVariant *
fd_lister_properties (VdSelfTest *self, guint32 pid, const gchar *output)
{
  g_autofree gchar *user = g_strdup_printf ("%u", vd_session_get_uid (self->session));
  g_autofree gchar *dir = g_strdup_printf ("/proc/%u/fd", pid);
  const gchar *argv[] = { "/usr/bin/find", dir, "-mindepth", "1", "-maxdepth", "1", "-printf", "%l\\n", NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string ("Vivarium self-test: list a guest's open files"));
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("oneshot"));
  g_variant_builder_add (&b, "(sv)", "User", g_variant_new_string (user));
  g_variant_builder_add (&b, "(sv)", "Group", g_variant_new_string (VIVARIUM_QEMU_GROUP));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (&b, "(sv)", "StandardOutputFile", g_variant_new_string (output));
  g_variant_builder_add (&b, "(sv)", "NoNewPrivileges", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "PrivateNetwork", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "ExecStart", g_variant_new_parsed ("[(%s, %^as, false)]", argv[0], argv));
  return g_variant_builder_end (&b);
}

static void run_probes (VdSelfTest *self);

static void
fd_lister_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSelfTest) self = user_data;
  g_autofree gchar *output = fd_listing_path (self);
  g_autofree gchar *allowed = g_strjoinv (",", (gchar **) allowed_devices);
  g_autofree gchar *listing = NULL;
  g_autoptr(GError) error = NULL;

  if (!vd_systemd_start_transient_finish (VD_SYSTEMD (source), res, &error) ||
      !g_file_get_contents (output, &listing, NULL, &error))
    add_host_check (self, "qemu-devices", allowed, error->message, FALSE);
  else
    check_process_devices (self, listing);
  g_unlink (output);
  run_probes (self);
}

static void
list_process_fds (VdSelfTest *self, guint32 pid)
{
  g_autofree gchar *output = fd_listing_path (self);
  g_autofree gchar *unit = g_strdup_printf ("vivarium-selftest-fds-%s.service", vd_session_get_id (self->session));

  g_unlink (output);
  vd_systemd_start_transient_async (self->systemd, unit,
                                    fd_lister_properties (self, pid, output), NULL, NULL,
                                    fd_lister_done_cb, g_object_ref (self));
}

static JsonArray *
addresses_to_json (GVariant *value)
{
  JsonArray *array = json_array_new ();
  GVariantIter iter;
  gint32 family;
  GVariant *bytes;
  guint32 prefix;

  if (value == NULL || !g_variant_is_of_type (value, G_VARIANT_TYPE ("a(iayu)")))
    return array;
  g_variant_iter_init (&iter, value);
  while (g_variant_iter_next (&iter, "(i@ayu)", &family, &bytes, &prefix)) {
    gsize len = 0;
    const guint8 *data = g_variant_get_fixed_array (bytes, &len, 1);
    g_autoptr(GInetAddress) addr = NULL;

    if (len == 4 || len == 16) {
      g_autofree gchar *text = NULL;
      g_autofree gchar *cidr = NULL;
      addr = g_inet_address_new_from_bytes (data, len == 4 ? G_SOCKET_FAMILY_IPV4 : G_SOCKET_FAMILY_IPV6);
      text = g_inet_address_to_string (addr);
      /* json-glib copies the string. */
      cidr = g_strdup_printf ("%s/%u", text, prefix);
      json_array_add_string_element (array, cidr);
    }
    g_variant_unref (bytes);
  }
  return array;
}

static GVariant *
unit_property (VdSelfTest *self, const gchar *name)
{
  VdSystemd *systemd = self->systemd;

  return vd_systemd_get_unit_property (systemd, vd_session_get_unit (self->session),
                                       "org.freedesktop.systemd1.Service", name, NULL);
}

static void
check_unit (VdSelfTest *self)
{
  g_autoptr(GVariant) deny = unit_property (self, "IPAddressDeny");
  g_autoptr(GVariant) allow = unit_property (self, "IPAddressAllow");
  gsize n_builtin = 0;
  gsize n_deny = deny != NULL ? g_variant_n_children (deny) : 0;
  g_autofree gchar *deny_text = g_strdup_printf ("%" G_GSIZE_FORMAT " entries", n_deny);
  g_autofree gchar *want_deny = NULL;

  vivarium_denylist_builtin (&n_builtin);
  add_host_check (self, "unit-ip-address-allow-empty", "0 entries",
                  allow != NULL ? (g_variant_n_children (allow) == 0 ? "0 entries" : "not empty") : "unreadable",
                  allow != NULL && g_variant_n_children (allow) == 0);
  /* The scratch configurations must really lack the layer they leave
   * out, or "layer 2 alone" would silently test both. */
  want_deny = current (self)->layer1 ? g_strdup_printf (">= %" G_GSIZE_FORMAT " entries", n_builtin)
                                     : g_strdup ("0 entries");
  add_host_check (self, "unit-ip-address-deny", want_deny, deny != NULL ? deny_text : "unreadable",
                  deny != NULL && (current (self)->layer1 ? n_deny >= n_builtin : n_deny == 0));
}

/* An allowlist session's unit has no deny list to count: it has a network
 * namespace of its own and denies every address, allowing none (as the
 * session pool checked at start; read again here, as the result's own
 * evidence). Its proxy carries the deny list, and its uid is in the table. */
static void
check_unit_closed (VdSelfTest *self)
{
  VdEgress *egress = vd_session_get_egress (self->session);
  guint32 egress_uid = vd_session_get_egress_uid (self->session);
  guint64 packets = 0, bytes = 0;
  gboolean covered = egress_uid != 0 && egress_uid != vd_guard_get_uncovered_uid (self->guard) &&
                     vd_guard_get_counters (self->guard, egress_uid, &packets, &bytes);
  const gchar *state = vivarium_dbus_session_get_egress_state (VIVARIUM_DBUS_SESSION (vd_session_get_skeleton (self->session)));
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) proxy_error = NULL;
  gboolean closed = vd_guard_check_unit_closed (self->guard, vd_session_get_unit (self->session), &error);
  gboolean proxy_denies = egress != NULL && vd_guard_check_unit (self->guard, vd_egress_get_unit (egress), &proxy_error);

  add_host_check (self, "unit-closed-network", "PrivateNetwork, IPAddressDeny=any, IPAddressAllow= empty",
                  closed ? "closed" : error->message, closed);
  add_host_check (self, "egress-proxy-ip-address-deny", "the deny list on the proxy's unit",
                  proxy_denies ? "the deny list" : egress == NULL ? "no egress proxy" : proxy_error->message,
                  proxy_denies);
  add_host_check (self, "egress-proxy-uid-covered-by-nft", "covered", covered ? "covered" : "not covered", covered);
  add_host_check (self, "egress-state", "running", state != NULL ? state : "?", g_strcmp0 (state, "running") == 0);
}

static void
check_layer2_coverage (VdSelfTest *self)
{
  VdGuard *guard = self->guard;
  guint32 uid = vd_session_get_uid (self->session);
  gboolean uncovered = uid == vd_guard_get_uncovered_uid (guard);
  g_autoptr(GError) error = NULL;
  gboolean verified = vd_guard_verify_table (guard, &error);

  add_host_check (self, "nft-table-verify", "the table holds the expected rules",
                  verified ? "verified" : error->message, verified);
  add_host_check (self, "session-uid-covered-by-nft", current (self)->layer2 ? "covered" : "not covered",
                  uncovered ? "not covered" : "covered", uncovered != current (self)->layer2);
}

/* Ends by running the probes, once the fds have been listed. */
static void
run_host_checks (VdSelfTest *self)
{
  guint32 pid = vd_session_get_main_pid (self->session);

  if (current (self)->allowlist)
    check_unit_closed (self);
  else
    check_unit (self);
  check_layer2_coverage (self);
  if (pid == 0) {
    add_host_check (self, "qemu-main-pid", "a running process", "no MainPID", FALSE);
    run_probes (self);
    return;
  }
  check_process_status (self, pid, vd_session_get_uid (self->session));
  list_process_fds (self, pid);
}

/* --- probes ------------------------------------------------------------ */

/* Wait (bounded) for the DHCP lease and the SLAAC address, so that a
 * slow boot does not pass for a block. The positive controls catch the
 * rest. */
static void
append_network_wait (GString *s)
{
  g_string_append (s, "i=0; while [ $i -lt 40 ]; do "
                      "ip -4 addr show dev eth0 | grep -q 'inet ' && "
                      "ip -6 addr show dev eth0 scope global | grep -q inet6 && break; "
                      "sleep 0.25; i=$((i+1)); done\n");
}

static gchar *
probe_script (VdSelfTest *self)
{
  GString *s = g_string_new (NULL);
  guint16 tcp = vd_canary_get_tcp_port (self->canary);
  guint16 udp = vd_canary_get_udp_port (self->canary);

  append_network_wait (s);
  /* busybox nc has no UDP mode here: tftp sends a read request datagram
   * (and retries), which is all a UDP canary needs to see. */
  for (guint i = 0; i < G_N_ELEMENTS (probes); i++) {
    g_string_append_printf (s, "( timeout 8 nc -w 3 %s %u </dev/null >/dev/null 2>&1; echo \"%s tcp $?\" ) &\n",
                            probes[i].guest_address, tcp, probes[i].name);
    g_string_append_printf (s, "( timeout 3 tftp -g -r vivarium-probe -l /dev/null %s %u >/dev/null 2>&1; "
                               "echo \"%s udp $?\" ) &\n", probes[i].guest_address, udp, probes[i].name);
  }
  g_string_append (s, "wait\n");
  return g_string_free (s, FALSE);
}

/* The guest's words are evidence only; the canary decides. */
static void
parse_guest_output (VdSelfTest *self, GBytes *out)
{
  g_autofree gchar *text = g_strndup (g_bytes_get_data (out, NULL), g_bytes_get_size (out));
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  g_hash_table_remove_all (self->guest_status);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit (lines[i], " ", 3);
    gint64 status;

    /* Exit statuses, and HTTP status codes from the proxy probes. */
    if (g_strv_length (f) != 3 || !g_ascii_string_to_signed (f[2], 10, 0, 999, &status, NULL))
      continue;
    g_hash_table_insert (self->guest_status, g_strdup_printf ("%s/%s", f[0], f[1]), GINT_TO_POINTER ((gint) status + 1));
  }
}

static gboolean
canary_saw (VdSelfTest *self, const Probe *probe, const gchar *transport, guint *count, const gchar **peer)
{
  *count = 0;
  *peer = NULL;
  return self->canary != NULL && vd_canary_lookup (self->canary, probe->canary_address, transport, count, peer);
}

/* An allowlist guest has no direct way out at all: its positive control
 * is the CONNECT its proxy allows, which shows the guest up, its network
 * up and the canary listening. */
static gboolean
control_reached (VdSelfTest *self, gboolean ipv6, const gchar *transport)
{
  if (current (self)->allowlist)
    return self->proxy_control;
  for (guint i = 0; i < G_N_ELEMENTS (probes); i++) {
    guint count;
    const gchar *peer;
    if (probes[i].expect_reached && probes[i].ipv6 == ipv6 && canary_saw (self, &probes[i], transport, &count, &peer))
      return count > 0;
  }
  return FALSE;
}

static const gchar *
observe (VdSelfTest *self, const Probe *probe, const gchar *transport, guint count, gint *guest_status)
{
  g_autofree gchar *key = g_strdup_printf ("%s/%s", probe->name, transport);
  gint stored = GPOINTER_TO_INT (g_hash_table_lookup (self->guest_status, key));

  *guest_status = stored - 1;
  if (self->phase_error != NULL)
    return "not-run";
  if (count > 0)
    return "reached";
  /* A TCP connect that succeeded without reaching our listener was
   * answered by something else: not "blocked". */
  if (g_str_equal (transport, "tcp") && stored == 1)
    return "answered-elsewhere";
  return "blocked";
}

static const gchar *
judge (VdSelfTest *self, const gchar *expected, const gchar *observed, gboolean control)
{
  if (self->phase_error != NULL)
    return "inconclusive";
  if (g_str_equal (expected, "reached") || g_str_equal (expected, "answered"))
    return g_str_equal (observed, expected) ? "pass" : "inconclusive";
  /* Without a working positive control, "blocked" may just mean "down". */
  if (!control)
    return g_str_equal (observed, expected) ? "inconclusive" : "fail";
  return g_str_equal (observed, expected) ? "pass" : "fail";
}

/* The guest reaches nothing directly in an allowlist session, the positive
 * controls included. */
static const gchar *
expected_direct (VdSelfTest *self, const Probe *probe)
{
  return probe->expect_reached && !current (self)->allowlist ? "reached" : "blocked";
}

static JsonObject *
phase_evidence (VdSelfTest *self, guint64 packets, guint64 bytes, gboolean counters)
{
  JsonObject *ev = json_object_new ();
  g_autoptr(GVariant) deny = NULL;
  g_autoptr(GVariant) allow = NULL;

  json_object_set_boolean_member (ev, "layer1", current (self)->layer1);
  json_object_set_boolean_member (ev, "layer2", current (self)->layer2);
  if (self->phase_error != NULL) {
    json_object_set_string_member (ev, "error", self->phase_error);
    return ev;
  }
  json_object_set_int_member (ev, "session-uid", vd_session_get_uid (self->session));
  json_object_set_string_member (ev, "unit", vd_session_get_unit (self->session));
  /* The guard is per QEMU process, restored or booted: the matrix says
   * which kind of guest each configuration's probes ran in. */
  json_object_set_string_member (ev, "start-mode", vd_session_get_start_mode (self->session));
  if (counters && self->counters_before) {
    json_object_set_int_member (ev, "nft-dropped-packets-delta", (gint64) (packets - self->packets_before));
    json_object_set_int_member (ev, "nft-dropped-bytes-delta", (gint64) (bytes - self->bytes_before));
  } else {
    json_object_set_null_member (ev, "nft-dropped-packets-delta");
    json_object_set_null_member (ev, "nft-dropped-bytes-delta");
  }
  deny = unit_property (self, "IPAddressDeny");
  allow = unit_property (self, "IPAddressAllow");
  json_object_set_array_member (ev, "unit-ip-address-deny", addresses_to_json (deny));
  json_object_set_array_member (ev, "unit-ip-address-allow", addresses_to_json (allow));
  return ev;
}

static void
add_row (VdSelfTest *self, const Probe *probe, const gchar *transport, JsonObject *phase_ev)
{
  JsonObject *row = json_object_new ();
  JsonObject *ev = json_object_new ();
  const gchar *expected = expected_direct (self, probe);
  const gchar *peer = NULL;
  guint count = 0;
  gint guest_status = -1;
  const gchar *observed, *outcome;
  JsonObjectIter iter;
  const gchar *member;
  JsonNode *node;

  canary_saw (self, probe, transport, &count, &peer);
  observed = observe (self, probe, transport, count, &guest_status);
  outcome = judge (self, expected, observed, control_reached (self, probe->ipv6, transport));
  json_object_set_string_member (row, "probe", probe->name);
  json_object_set_string_member (row, "configuration", current (self)->name);
  if (self->session != NULL)
    json_object_set_string_member (row, "start-mode", vd_session_get_start_mode (self->session));
  json_object_set_string_member (row, "transport", transport);
  json_object_set_string_member (row, "address", probe->guest_address);
  json_object_set_string_member (row, "expected", expected);
  json_object_set_string_member (row, "observed", observed);
  json_object_set_string_member (row, "outcome", outcome);
  json_object_set_boolean_member (row, "pass", g_str_equal (outcome, "pass"));
  json_object_set_string_member (ev, "canary-address", probe->canary_address);
  json_object_set_int_member (ev, "canary-port", g_str_equal (transport, "tcp") ? vd_canary_get_tcp_port (self->canary)
                                                                              : vd_canary_get_udp_port (self->canary));
  json_object_set_int_member (ev, "canary-seen", count);
  if (peer != NULL)
    json_object_set_string_member (ev, "canary-first-peer", peer);
  else
    json_object_set_null_member (ev, "canary-first-peer");
  if (guest_status >= 0)
    json_object_set_int_member (ev, "guest-exit-status", guest_status);
  else
    json_object_set_null_member (ev, "guest-exit-status");
  json_object_set_boolean_member (ev, "positive-control-reached", control_reached (self, probe->ipv6, transport));
  json_object_iter_init (&iter, phase_ev);
  while (json_object_iter_next (&iter, &member, &node))
    json_object_set_member (ev, member, json_node_copy (node));
  json_object_set_object_member (row, "evidence", ev);
  json_array_add_object_element (self->rows, row);
}

/* The canary decides "reached"; the rest takes what the guest got (a
 * status line, a DNS RCODE) and the proxy's logged decision together. */
static const gchar *
observe_proxy (VdSelfTest *self, const VdSelfTestProxyProbe *probe, guint count, gint status, const gchar *verdict)
{
  gboolean denied = g_strcmp0 (verdict, "denied") == 0;

  if (self->phase_error != NULL)
    return "not-run";
  if (count > 0)
    return "reached";
  switch (probe->ask) {
  case VD_SELF_TEST_ASK_DNS:
    if (status == 0 && g_strcmp0 (verdict, "allowed") == 0)
      return "answered";
    /* A scratch proxy that looked a name up, or sent anything anywhere,
     * while only its DNS was asked: the question may have left. */
    if (status == 5 && denied)
      return self->live_session == NULL && (self->dns_stage.lookups > 0 || self->dns_stage.packets > 0) ? "looked-up"
                                                                                                        : "refused";
    return "blocked";
  case VD_SELF_TEST_ASK_HELLO:
    /* The CONNECT was let through; the hello that followed was cut. */
    return status == 200 && denied ? "refused" : "blocked";
  case VD_SELF_TEST_ASK_CONNECT:
  default:
    /* The 403 is the guest's word; the proxy's own log says it decided so. */
    return status == 403 && denied ? "refused" : "blocked";
  }
}

/* A dead proxy decides nothing: its log is read only while it runs. The
 * decision is the one whose reason says what the probe is about (the
 * CONNECT and the hello probe share a destination); failing that, the last
 * on the destination, as evidence only. */
static gboolean
proxy_decision (VdSelfTest *self, const VdSelfTestProxyProbe *probe, guint16 port, gchar **verdict, gchar **reason,
                guint64 *duration_ms)
{
  VdEgress *egress = self->session != NULL ? vd_session_get_egress (self->session) : NULL;
  g_autofree gchar *path = NULL;

  *verdict = NULL;
  *reason = NULL;
  *duration_ms = 0;
  if (egress == NULL || current_stage (self) == STAGE_PROXY_KILLED)
    return FALSE;
  path = vd_egress_dup_log_path (egress);
  if (vd_self_test_egress_decision (path, probe->host, port, probe->reason_part, verdict, reason, duration_ms))
    return TRUE;
  g_clear_pointer (verdict, g_free);
  g_clear_pointer (reason, g_free);
  vd_self_test_egress_decision (path, probe->host, port, NULL, verdict, reason, duration_ms);
  return FALSE;
}

static void
set_string_or_null (JsonObject *obj, const gchar *member, const gchar *value)
{
  if (value != NULL)
    json_object_set_string_member (obj, member, value);
  else
    json_object_set_null_member (obj, member);
}

static void
set_int_or_null (JsonObject *obj, const gchar *member, gint64 value)
{
  if (value >= 0)
    json_object_set_int_member (obj, member, value);
  else
    json_object_set_null_member (obj, member);
}

static void
set_activity (JsonObject *obj, const gchar *prefix, const ProxyActivity *a)
{
  g_autofree gchar *lookups = g_strdup_printf ("%s-lookups", prefix);
  g_autofree gchar *packets = g_strdup_printf ("%s-ip-egress-packets", prefix);

  set_int_or_null (obj, lookups, a->lookups);
  set_int_or_null (obj, packets, a->packets);
}

static JsonObject *
proxy_evidence (VdSelfTest *self, const VdSelfTestProxyProbe *probe, guint count, const gchar *peer,
                gint status, const gchar *verdict, const gchar *reason, guint64 duration_ms)
{
  JsonObject *ev = json_object_new ();
  gboolean dns = probe->ask == VD_SELF_TEST_ASK_DNS;
  g_autofree gchar *via = g_strdup_printf ("%s:%u", VD_EGRESS_GUEST_ADDRESS, dns ? 53 : VD_EGRESS_PROXY_PORT);

  json_object_set_string_member (ev, "via", via);
  set_string_or_null (ev, "canary-address", probe->canary_address);
  json_object_set_int_member (ev, "canary-port", vd_canary_get_tcp_port (self->canary));
  json_object_set_int_member (ev, "canary-seen", count);
  set_string_or_null (ev, "canary-first-peer", peer);
  set_int_or_null (ev, dns ? "dns-rcode" : "http-status", status);
  if (probe->sni != NULL)
    json_object_set_string_member (ev, "tls-server-name", probe->sni);
  set_string_or_null (ev, "egress-verdict", verdict);
  set_string_or_null (ev, "egress-reason", reason);
  /* A tunnel is logged when it ends: how long it stayed open. */
  if (verdict != NULL)
    json_object_set_int_member (ev, "egress-duration-ms", (gint64) duration_ms);
  json_object_set_boolean_member (ev, "positive-control-reached", self->proxy_control);
  /* What the proxy did meanwhile: nothing at all while only its DNS was
   * asked, against the CONNECT stage, where both counts must move. */
  if (dns && self->live_session == NULL) {
    set_activity (ev, "dns-stage", &self->dns_stage);
    set_activity (ev, "connect-stage", &self->proxy_stage);
  }
  return ev;
}

/* The DNS probes' positive control: the allowed name answered, and both
 * counts seen to move when the proxy did look up and connect. A live
 * session's: its proxy answered the question at all. */
static gboolean
proxy_row_control (VdSelfTest *self, const VdSelfTestProxyProbe *probe, gint status, gboolean decided)
{
  if (probe->ask != VD_SELF_TEST_ASK_DNS)
    return self->proxy_control;
  if (self->live_session != NULL)
    return status >= 0 && decided;
  return self->proxy_control && self->dns_control && self->dns_stage.lookups >= 0 && self->dns_stage.packets >= 0 &&
         self->proxy_stage.lookups > 0 && self->proxy_stage.packets > 0;
}

static void
add_proxy_row (VdSelfTest *self, const VdSelfTestProxyProbe *probe, JsonObject *phase_ev)
{
  JsonObject *row = json_object_new ();
  gboolean dns = probe->ask == VD_SELF_TEST_ASK_DNS;
  guint16 port = dns ? 0 : vd_canary_get_tcp_port (self->canary);
  g_autofree gchar *key = g_strdup_printf ("%s/%s", probe->name, dns ? "dns" : "http");
  gint status = GPOINTER_TO_INT (g_hash_table_lookup (self->guest_status, key)) - 1;
  g_autofree gchar *target = dns ? g_strdup (probe->host) : g_strdup_printf ("%s:%u", probe->host, port);
  g_autofree gchar *verdict = NULL;
  g_autofree gchar *reason = NULL;
  const gchar *peer = NULL;
  const gchar *observed, *outcome;
  gboolean decided, control;
  guint64 duration_ms = 0;
  JsonObject *ev;
  JsonObjectIter iter;
  const gchar *member;
  JsonNode *node;
  guint count = 0;

  if (probe->canary_address != NULL)
    vd_canary_lookup (self->canary, probe->canary_address, "tcp", &count, &peer);
  decided = proxy_decision (self, probe, port, &verdict, &reason, &duration_ms);
  observed = observe_proxy (self, probe, count, status, decided ? verdict : NULL);
  control = proxy_row_control (self, probe, status, decided);
  outcome = judge (self, probe->expected, observed, control);
  json_object_set_string_member (row, "probe", probe->name);
  json_object_set_string_member (row, "configuration", current (self)->name);
  if (self->session != NULL)
    json_object_set_string_member (row, "start-mode", vd_session_get_start_mode (self->session));
  json_object_set_string_member (row, "transport", dns ? "dns" : "tcp");
  json_object_set_string_member (row, "address", target);
  json_object_set_string_member (row, "expected", probe->expected);
  json_object_set_string_member (row, "observed", observed);
  json_object_set_string_member (row, "outcome", outcome);
  json_object_set_boolean_member (row, "pass", g_str_equal (outcome, "pass"));
  ev = proxy_evidence (self, probe, count, peer, status, verdict, reason, duration_ms);
  if (dns)
    json_object_set_boolean_member (ev, "positive-control-reached", control);
  json_object_iter_init (&iter, phase_ev);
  while (json_object_iter_next (&iter, &member, &node))
    json_object_set_member (ev, member, json_node_copy (node));
  json_object_set_object_member (row, "evidence", ev);
  json_array_add_object_element (self->rows, row);
  if (dns && self->live_session != NULL)
    self->proxy_control = control;
}

static gboolean
proxy_control_seen (VdSelfTest *self)
{
  guint count = 0;
  const gchar *peer = NULL;

  return self->phase_error == NULL &&
         vd_canary_lookup (self->canary, proxy_probes[0].canary_address, "tcp", &count, &peer) && count > 0;
}

/* The proxy's counts now: lookups (its usage file) and the packets its
 * unit sent (IPAccounting). FALSE when either cannot be read. */
static gboolean
proxy_counters (VdSelfTest *self, guint64 *lookups, guint64 *packets)
{
  VdEgress *egress = self->session != NULL ? vd_session_get_egress (self->session) : NULL;
  g_autoptr(GVariant) v = NULL;

  if (egress == NULL || !vd_self_test_egress_lookups (vd_egress_get_dir (egress), lookups))
    return FALSE;
  v = vd_systemd_get_unit_property (self->systemd, vd_egress_get_unit (egress), "org.freedesktop.systemd1.Service",
                                    "IPEgressPackets", NULL);
  if (v == NULL || !g_variant_is_of_type (v, G_VARIANT_TYPE_UINT64) || g_variant_get_uint64 (v) == G_MAXUINT64)
    return FALSE;
  *packets = g_variant_get_uint64 (v);
  return TRUE;
}

static void
count_before (VdSelfTest *self)
{
  self->counted_before = proxy_counters (self, &self->lookups_before, &self->proxy_packets_before);
}

static ProxyActivity
count_since (VdSelfTest *self)
{
  ProxyActivity a = { -1, -1 };
  guint64 lookups, packets;

  if (self->counted_before && proxy_counters (self, &lookups, &packets)) {
    a.lookups = (gint64) (lookups - self->lookups_before);
    a.packets = (gint64) (packets - self->proxy_packets_before);
  }
  return a;
}

static gboolean
dns_answered (VdSelfTest *self)
{
  gint status = GPOINTER_TO_INT (g_hash_table_lookup (self->guest_status, "dns-allowed/dns")) - 1;
  g_autofree gchar *verdict = NULL;
  g_autofree gchar *reason = NULL;
  guint64 duration_ms;

  return status == 0 && proxy_decision (self, &dns_probes[0], 0, &verdict, &reason, &duration_ms) &&
         g_strcmp0 (verdict, "allowed") == 0;
}

/* The rows of the stage that just ran (or never ran, when the phase
 * failed: then they say "not-run"). */
static void
record_rows (VdSelfTest *self)
{
  VdGuard *guard = self->guard;
  guint64 packets = 0, bytes = 0;
  gboolean counters = self->session != NULL &&
                      vd_guard_get_counters (guard, vd_session_get_uid (self->session), &packets, &bytes);
  g_autoptr(JsonObject) phase_ev = phase_evidence (self, packets, bytes, counters);

  switch (current_stage (self)) {
  case STAGE_PROXY:
    self->proxy_stage = count_since (self);
    self->proxy_control = proxy_control_seen (self);
    for (guint i = 0; i < G_N_ELEMENTS (proxy_probes); i++)
      add_proxy_row (self, &proxy_probes[i], phase_ev);
    break;
  case STAGE_DNS:
    if (self->live_session != NULL) {
      add_proxy_row (self, &live_dns_probe, phase_ev);
      break;
    }
    self->dns_stage = count_since (self);
    self->dns_control = dns_answered (self);
    for (guint i = 0; i < G_N_ELEMENTS (dns_probes); i++)
      add_proxy_row (self, &dns_probes[i], phase_ev);
    break;
  case STAGE_DIRECT:
    for (guint i = 0; i < G_N_ELEMENTS (probes); i++) {
      for (guint t = 0; t < G_N_ELEMENTS (transports); t++)
        add_row (self, &probes[i], transports[t], phase_ev);
    }
    break;
  case STAGE_PROXY_KILLED:
    add_proxy_row (self, &proxy_killed_probe, phase_ev);
    break;
  case STAGE_DONE:
  default:
    break;
  }
}

/* --- the run ----------------------------------------------------------- */

static void start_phase (VdSelfTest *self);
static void finish (VdSelfTest *self);

static void
record_phase (VdSelfTest *self)
{
  JsonObject *obj = json_object_new ();
  g_autofree gchar *started = format_time (self->phase_started_at);
  g_autofree gchar *finished = format_time (g_get_real_time ());

  json_object_set_string_member (obj, "configuration", current (self)->name);
  json_object_set_boolean_member (obj, "layer1", current (self)->layer1);
  json_object_set_boolean_member (obj, "layer2", current (self)->layer2);
  json_object_set_string_member (obj, "egress", current (self)->allowlist ? "allowlist" : "open");
  json_object_set_string_member (obj, "started-at", started);
  json_object_set_string_member (obj, "finished-at", finished);
  if (self->session != NULL) {
    json_object_set_string_member (obj, "session", vd_session_get_id (self->session));
    json_object_set_int_member (obj, "session-uid", vd_session_get_uid (self->session));
    json_object_set_string_member (obj, "start-mode", vd_session_get_start_mode (self->session));
  }
  if (self->phase_error != NULL)
    json_object_set_string_member (obj, "error", self->phase_error);
  json_array_add_object_element (self->phases, obj);
}

static void
next_phase (VdSelfTest *self)
{
  record_phase (self);
  vd_progress_step_done (self->progress);
  g_clear_object (&self->session);
  g_clear_pointer (&self->phase_error, g_free);
  self->stage_index = 0;
  self->proxy_control = FALSE;
  self->dns_control = FALSE;
  self->counted_before = FALSE;
  self->proxy_stage = self->dns_stage = (ProxyActivity) { -1, -1 };
  self->phase++;
  if (self->phase < self->n_phases)
    start_phase (self);
  else
    finish (self);
}

static void
session_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSelfTest) self = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_session_stop_finish (VD_SESSION (source), res, &error))
    g_warning ("self-test: stopping %s: %s", vd_session_get_id (VD_SESSION (source)), error->message);
  next_phase (self);
}

/* A phase that failed part-way still lists every row it owed ("not-run"),
 * with nothing an earlier stage or phase left on the canary as evidence. */
static void
end_phase (VdSelfTest *self)
{
  if (current_stage (self) != STAGE_DONE)
    vd_canary_reset (self->canary);
  for (; current_stage (self) != STAGE_DONE; self->stage_index++)
    record_rows (self);
  phase_progress (self, PHASE_STEP_STOP, "stopping the scratch session");
  if (self->session == NULL || self->live_session != NULL) {
    g_clear_object (&self->session);
    next_phase (self);
    return;
  }
  vd_session_stop_async (self->session, session_stopped_cb, g_object_ref (self));
}

static void run_stage (VdSelfTest *self);

static void
stage_done (VdSelfTest *self)
{
  record_rows (self);
  self->stage_index++;
  if (self->phase_error != NULL || current_stage (self) == STAGE_DONE)
    end_phase (self);
  else
    run_stage (self);
}

static gboolean
settled_cb (gpointer user_data)
{
  VdSelfTest *self = user_data;

  vd_canary_drain (self->canary);
  stage_done (self);
  g_object_unref (self);
  return G_SOURCE_REMOVE;
}

static void
probes_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VdSelfTest *self = user_data;   /* the reference passes on to settled_cb */
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) result = vd_session_exec_finish (VD_SESSION (source), res, &error);

  if (result == NULL)
    self->phase_error = g_strdup_printf ("running the probes in the guest: %s", error->message);
  else
    parse_guest_output (self, result->out);
  g_timeout_add_seconds (SETTLE_SEC, settled_cb, self);
}

static gchar *
stage_script (VdSelfTest *self)
{
  guint16 tcp = vd_canary_get_tcp_port (self->canary);
  g_autofree gchar *ask = NULL;
  GString *s;

  switch (current_stage (self)) {
  case STAGE_PROXY:
    s = g_string_new (NULL);
    append_network_wait (s);
    ask = vd_self_test_egress_script (proxy_probes, G_N_ELEMENTS (proxy_probes), tcp);
    g_string_append (s, ask);
    return g_string_free (s, FALSE);
  case STAGE_DNS:
    s = g_string_new (NULL);
    /* A live session's first stage: its network may be coming up still. */
    if (self->live_session != NULL)
      append_network_wait (s);
    ask = self->live_session != NULL ? vd_self_test_egress_script (&live_dns_probe, 1, tcp)
                                     : vd_self_test_egress_script (dns_probes, G_N_ELEMENTS (dns_probes), tcp);
    g_string_append (s, ask);
    return g_string_free (s, FALSE);
  case STAGE_PROXY_KILLED:
    return vd_self_test_egress_script (&proxy_killed_probe, 1, tcp);
  case STAGE_DIRECT:
  case STAGE_DONE:
  default:
    return probe_script (self);
  }
}

static gchar *
stage_step (VdSelfTest *self)
{
  switch (current_stage (self)) {
  case STAGE_PROXY:
    return g_strdup_printf ("%s: asking the egress proxy for %" G_GSIZE_FORMAT " destinations", current (self)->name,
                            G_N_ELEMENTS (proxy_probes));
  case STAGE_DNS:
    return g_strdup_printf ("%s: asking the egress proxy's DNS", current (self)->name);
  case STAGE_PROXY_KILLED:
    return g_strdup_printf ("%s: asking the killed egress proxy again", current (self)->name);
  case STAGE_DIRECT:
  case STAGE_DONE:
  default:
    return g_strdup_printf ("%s: probing %" G_GSIZE_FORMAT " canaries from the guest", current (self)->name,
                            G_N_ELEMENTS (probes));
  }
}

static void
run_probes (VdSelfTest *self)
{
  g_autofree gchar *script = stage_script (self);
  const gchar *argv[] = { "/bin/sh", "-c", script, NULL };
  g_autofree gchar *step = stage_step (self);

  phase_progress (self, PHASE_STEP_PROBE, step);
  vd_canary_reset (self->canary);
  self->counters_before = vd_guard_get_counters (self->guard,
                                                 vd_session_get_uid (self->session),
                                                 &self->packets_before, &self->bytes_before);
  if (current_stage (self) == STAGE_PROXY || current_stage (self) == STAGE_DNS)
    count_before (self);
  vd_session_exec_async (self->session, argv, PROBE_EXEC_TIMEOUT_SEC, NULL, probes_done_cb, g_object_ref (self));
}

static const gchar *
egress_state (VdSelfTest *self)
{
  return vivarium_dbus_session_get_egress_state (VIVARIUM_DBUS_SESSION (vd_session_get_skeleton (self->session)));
}

/* Until the session says its proxy failed, or the bound: then the
 * allowed CONNECT again, which must reach nothing now. */
static gboolean
egress_failed_poll_cb (gpointer user_data)
{
  VdSelfTest *self = user_data;
  const gchar *state = egress_state (self);
  const gchar *reason = vivarium_dbus_session_get_egress_state_reason (VIVARIUM_DBUS_SESSION (vd_session_get_skeleton (self->session)));
  g_autofree gchar *observed = NULL;

  if (g_strcmp0 (state, "failed") != 0 && ++self->egress_polls < EGRESS_FAILED_POLL_TRIES)
    return G_SOURCE_CONTINUE;
  observed = g_strdup_printf ("%s%s%s%s", state != NULL ? state : "?", reason != NULL && reason[0] != '\0' ? " (" : "",
                              reason != NULL ? reason : "", reason != NULL && reason[0] != '\0' ? ")" : "");
  add_host_check (self, "egress-state-after-kill", "failed", observed, g_strcmp0 (state, "failed") == 0);
  run_probes (self);
  return G_SOURCE_REMOVE;
}

static void
proxy_killed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSelfTest) self = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_systemd_kill_unit_finish (VD_SYSTEMD (source), res, &error)) {
    self->phase_error = g_strdup_printf ("killing the egress proxy: %s", error->message);
    end_phase (self);
    return;
  }
  self->egress_polls = 0;
  g_timeout_add_full (G_PRIORITY_DEFAULT, EGRESS_FAILED_POLL_MS, egress_failed_poll_cb, g_object_ref (self),
                      g_object_unref);
}

/* SIGKILL through systemd (the daemon has no CAP_KILL): the proxy dies the
 * way a crash would, not by its own orderly stop. */
static void
kill_proxy (VdSelfTest *self)
{
  VdEgress *egress = vd_session_get_egress (self->session);
  g_autofree gchar *step = g_strdup_printf ("%s: killing the egress proxy", current (self)->name);

  phase_progress (self, PHASE_STEP_PROBE, step);
  if (egress == NULL) {
    self->phase_error = g_strdup ("the scratch session has no egress proxy to kill");
    end_phase (self);
    return;
  }
  vd_systemd_kill_unit_async (self->systemd, vd_egress_get_unit (egress), SIGKILL, proxy_killed_cb,
                              g_object_ref (self));
}

static void
run_stage (VdSelfTest *self)
{
  if (current_stage (self) == STAGE_PROXY_KILLED)
    kill_proxy (self);
  else
    run_probes (self);
}

/* A missing or unfrozen image is the caller's mistake, not a result. */
static gboolean
is_caller_error (GError *error)
{
  return g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND) ||
         g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FROZEN) ||
         g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
}

static void
fail_run (VdSelfTest *self, GError *error)
{
  GTask *task = g_steal_pointer (&self->task);

  vd_canary_teardown (self->canary);
  g_task_return_error (task, error);
  g_object_unref (task);
}

static void
scratch_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSelfTest) self = user_data;
  GError *error = NULL;

  self->session = vd_session_pool_start_scratch_finish (VD_SESSION_POOL (source), res, &error);
  if (self->session == NULL) {
    if (self->phase == 0 && is_caller_error (error)) {
      fail_run (self, error);
      return;
    }
    self->phase_error = g_strdup_printf ("starting the scratch session: %s", error->message);
    g_error_free (error);
    end_phase (self);
    return;
  }
  if (self->image_digest == NULL)
    self->image_digest = g_strdup (vd_image_get_digest (vd_session_get_image (self->session)));
  phase_progress (self, PHASE_STEP_HOST_CHECKS, NULL);
  run_host_checks (self);
}

static void
start_phase (VdSelfTest *self)
{
  const Configuration *c = current (self);
  g_auto(GStrv) allow = vd_self_test_egress_rules (vd_canary_get_tcp_port (self->canary));
  g_autofree gchar *step = g_strdup_printf ("%s: booting a scratch guest (layer 1 %s, layer 2 %s%s)", c->name,
                                            c->layer1 ? "on" : "off", c->layer2 ? "on" : "off",
                                            c->allowlist ? ", egress allowlist" : "");

  self->phase_started_at = g_get_real_time ();
  if (self->live_session != NULL) {
    phase_progress (self, PHASE_STEP_HOST_CHECKS, "live-session: probing the caller's running session");
    self->session = g_object_ref (self->live_session);
    self->image_digest = g_strdup (vd_image_get_digest (vd_session_get_image (self->session)));
    run_host_checks (self);
    return;
  }
  phase_progress (self, PHASE_STEP_BOOT, step);
  vd_session_pool_start_scratch_async (self->pool, self->boot_image, c->layer1, c->layer2,
                                       c->allowlist ? (const gchar * const *) allow : NULL, NULL, scratch_started_cb,
                                       g_object_ref (self));
}

/* --- the result -------------------------------------------------------- */

static gboolean
any_outcome (JsonArray *array, const gchar *member, const gchar *value)
{
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *obj = json_array_get_object_element (array, i);
    if (g_strcmp0 (json_object_get_string_member_with_default (obj, member, ""), value) == 0)
      return TRUE;
  }
  return FALSE;
}

static gboolean
any_check_failed (JsonArray *array)
{
  for (guint i = 0; i < json_array_get_length (array); i++) {
    if (!json_object_get_boolean_member_with_default (json_array_get_object_element (array, i), "pass", FALSE))
      return TRUE;
  }
  return FALSE;
}

static VivariumVerdict
compute_verdict (VdSelfTest *self)
{
  if (any_outcome (self->rows, "outcome", "fail") || any_check_failed (self->host_checks))
    return VIVARIUM_VERDICT_FAIL;
  if (json_array_get_length (self->rows) == 0 || any_outcome (self->rows, "outcome", "inconclusive"))
    return VIVARIUM_VERDICT_INCONCLUSIVE;
  return VIVARIUM_VERDICT_PASS;
}

static JsonNode *
build_canary_info (VdSelfTest *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  const gchar * const *addresses = vd_canary_get_addresses ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "tcp-port");
  json_builder_add_int_value (b, vd_canary_get_tcp_port (self->canary));
  json_builder_set_member_name (b, "udp-port");
  json_builder_add_int_value (b, vd_canary_get_udp_port (self->canary));
  json_builder_set_member_name (b, "addresses");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "127.0.0.1");
  json_builder_add_string_value (b, "::1");
  for (guint i = 0; addresses[i] != NULL; i++)
    json_builder_add_string_value (b, addresses[i]);
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gchar *
build_result (VdSelfTest *self)
{
  g_autoptr(JsonObject) root = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree gchar *started = format_time (self->started_at);
  g_autofree gchar *finished = format_time (self->finished_at);
  JsonArray *names = json_array_new ();

  for (guint i = 0; i < self->n_phases; i++)
    json_array_add_string_element (names, configurations[i].name);
  json_object_set_string_member (root, "schema", VD_SELF_TEST_SCHEMA);
  json_object_set_string_member (root, "verdict", vivarium_verdict_to_string (self->verdict));
  json_object_set_string_member (root, "started-at", started);
  json_object_set_string_member (root, "finished-at", finished);
  json_object_set_int_member (root, "finished-at-usec", self->finished_at);
  json_object_set_double_member (root, "duration-sec", (gdouble) (self->finished_at - self->started_at) / G_USEC_PER_SEC);
  json_object_set_string_member (root, "image", self->image);
  if (self->image_digest != NULL)
    json_object_set_string_member (root, "image-digest", self->image_digest);
  else
    json_object_set_null_member (root, "image-digest");
  json_object_set_boolean_member (root, "negative-control", self->negative_control);
  json_object_set_array_member (root, "configurations", names);
  json_object_set_member (root, "canary", build_canary_info (self));
  json_object_set_array_member (root, "phases", json_array_ref (self->phases));
  json_object_set_array_member (root, "host-checks", json_array_ref (self->host_checks));
  json_object_set_array_member (root, "probes", json_array_ref (self->rows));
  json_node_set_object (node, root);
  return json_to_string (node, TRUE);
}

static void
check_canary_removed (VdSelfTest *self)
{
  const gchar *unit = vd_canary_get_unit (self->canary);
  gboolean link_left = g_file_test ("/sys/class/net/" VD_CANARY_HOST_LINK, G_FILE_TEST_EXISTS);
  gboolean unit_left = unit != NULL && vd_systemd_unit_is_loaded (self->systemd, unit);

  add_host_check (self, "canary-removed", "no veth, no canary unit",
                  link_left ? "the veth is still there" : unit_left ? "its unit is still loaded" : "removed",
                  !link_left && !unit_left);
}

static void
finish (VdSelfTest *self)
{
  GTask *task = g_steal_pointer (&self->task);

  vd_progress_set_message (self->progress, NULL);
  vd_canary_teardown (self->canary);
  check_canary_removed (self);
  self->finished_at = g_get_real_time ();
  self->verdict = compute_verdict (self);
  g_info ("self-test verdict: %s", vivarium_verdict_to_string (self->verdict));
  g_task_return_pointer (task, build_result (self), g_free);
  g_object_unref (task);
}

static void
canary_set_up_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSelfTest) self = user_data;
  GError *error = NULL;

  if (!vd_canary_setup_finish (VD_CANARY (source), res, &error)) {
    g_prefix_error (&error, "Cannot set up the canary network: ");
    fail_run (self, error);
    return;
  }
  vd_progress_step_done (self->progress);
  start_phase (self);
}

void
vd_self_test_run_async (VdSelfTest *self, GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (self->task == NULL);
  self->task = g_task_new (self, NULL, callback, user_data);
  self->started_at = g_get_real_time ();
  self->canary = vd_canary_new ();
  declare_steps (self);
  vd_progress_set_message (self->progress, NULL);
  vd_canary_setup_async (self->canary, self->systemd, NULL, canary_set_up_cb, g_object_ref (self));
}

gchar *
vd_self_test_run_finish (VdSelfTest *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
