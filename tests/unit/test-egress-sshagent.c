/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The session's ssh-agent (docs/secrets.md, "SSH keys"): the message filter
 * as a plain function, then the built vivarium-egress with --ssh-keys and
 * a real ssh-agent behind it, spoken to on DIR/ssh-agent.sock: it lists
 * and signs with the named key only (the signature verified with GnuTLS
 * against the key's public half), refuses a sign request for another key,
 * an add request and an oversized message, logs each, leaves no key file
 * behind and no agent once the proxy is killed. */

#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "vivarium-denylist.h"
#include "vivarium-egress-policy.h"
#include "vivarium-egress-sshagent-filter.h"
#include "vivarium-ssh-key.h"

#define WAIT_SEC 20

/* --- helpers -------------------------------------------------------------- */

static void
put_u32 (GByteArray *a, guint32 v)
{
  guint8 b[4] = { v >> 24, v >> 16, v >> 8, v };
  g_byte_array_append (a, b, 4);
}

static guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

static void
put_string (GByteArray *a, const guint8 *data, gsize len)
{
  put_u32 (a, (guint32) len);
  g_byte_array_append (a, data, (guint) len);
}

static GByteArray *
sign_request (GBytes *blob, const gchar *data)
{
  GByteArray *a = g_byte_array_new ();
  guint8 type = VIVARIUM_SSH_AGENTC_SIGN_REQUEST;
  gsize len = 0;
  const guint8 *b = g_bytes_get_data (blob, &len);

  g_byte_array_append (a, &type, 1);
  put_string (a, b, len);
  put_string (a, (const guint8 *) data, strlen (data));
  put_u32 (a, 0);
  return a;
}

static GBytes *
fake_blob (const gchar *tag)
{
  g_autoptr(GByteArray) a = g_byte_array_new ();

  put_string (a, (const guint8 *) "ssh-ed25519", 11);
  put_string (a, (const guint8 *) tag, strlen (tag));
  return g_byte_array_free_to_bytes (g_steal_pointer (&a));
}

/* --- the filter ----------------------------------------------------------- */

static void
test_filter (void)
{
  g_autoptr(GPtrArray) blobs = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(GBytes) other = fake_blob ("key B, not the session's");
  g_autoptr(GByteArray) good = NULL;
  g_autoptr(GByteArray) bad = NULL;
  g_autoptr(GByteArray) trailing = NULL;
  g_autofree guint8 *big = g_malloc0 (VIVARIUM_SSH_AGENT_MAX_MESSAGE + 1);
  const guint8 identities[] = { 11 };
  const guint8 identities_long[] = { 11, 0 };
  const guint8 refused[] = { 17, 25, 18, 19, 20, 21, 22, 23, 27, 1, 9, 12, 14, 200 };
  const gchar *reason;
  guint key = 99;

  g_ptr_array_add (blobs, fake_blob ("key X"));
  g_ptr_array_add (blobs, fake_blob ("key A"));
  g_assert_cmpint (vivarium_ssh_agent_filter (identities, 1, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_RELAY_IDENTITIES);
  g_assert_cmpint (vivarium_ssh_agent_filter (identities_long, 2, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_REFUSE);
  good = sign_request (blobs->pdata[1], "data to sign");
  g_assert_cmpint (vivarium_ssh_agent_filter (good->data, good->len, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_RELAY_SIGN);
  g_assert_cmpuint (key, ==, 1);
  bad = sign_request (other, "data to sign");
  g_assert_cmpint (vivarium_ssh_agent_filter (bad->data, bad->len, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_REFUSE);
  g_assert_nonnull (strstr (reason, "does not name"));
  /* Cut short anywhere, or with a byte after the flags: refused. */
  for (guint n = 1; n < good->len; n++)
    g_assert_cmpint (vivarium_ssh_agent_filter (good->data, n, blobs, &key, &reason), ==, VIVARIUM_SSH_AGENT_REFUSE);
  trailing = sign_request (blobs->pdata[1], "data to sign");
  g_byte_array_append (trailing, (const guint8 *) "x", 1);
  g_assert_cmpint (vivarium_ssh_agent_filter (trailing->data, trailing->len, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_REFUSE);
  /* Every other type, with whatever follows it. */
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    g_autoptr(GByteArray) msg = sign_request (blobs->pdata[1], "x");
    msg->data[0] = refused[i];
    g_assert_cmpint (vivarium_ssh_agent_filter (msg->data, msg->len, blobs, &key, &reason), ==,
                     VIVARIUM_SSH_AGENT_REFUSE);
    g_assert_nonnull (reason);
  }
  /* The bound, and nothing. */
  big[0] = 11;
  g_assert_cmpint (vivarium_ssh_agent_filter (big, VIVARIUM_SSH_AGENT_MAX_MESSAGE + 1, blobs, &key, &reason), ==,
                   VIVARIUM_SSH_AGENT_REFUSE);
  g_assert_cmpint (vivarium_ssh_agent_filter (big, 0, blobs, &key, &reason), ==, VIVARIUM_SSH_AGENT_REFUSE);
}

/* --- the proxy's agent ------------------------------------------------------ */

typedef struct {
  gchar       *dir;
  gchar       *keys_dir;
  GSubprocess *proxy;
  gchar       *public_a;
  gchar       *public_b;
  gchar       *private_a;
  gchar       *private_b;
} Fixture;

static gchar *
read_file (const gchar *path)
{
  gchar *text = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  return text;
}

/* "TYPE BASE64 comment\n" → "TYPE BASE64". */
static gchar *
public_line (const gchar *path)
{
  g_autofree gchar *text = read_file (path);
  g_auto(GStrv) fields = g_strsplit (g_strstrip (text), " ", 3);

  return g_strdup_printf ("%s %s", fields[0], fields[1]);
}

static void
make_key (Fixture *f, const gchar *name)
{
  g_autofree gchar *path = g_build_filename (f->keys_dir, name, NULL);
  const gchar *argv[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path, NULL };
  g_autoptr(GError) error = NULL;
  gint status;

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
}

static gchar *
write_keys (Fixture *f)
{
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_ssh_key_free);
  VivariumSshKey *key = g_new0 (VivariumSshKey, 1);
  gchar *path = g_build_filename (f->dir, "ssh-keys", NULL);
  g_autoptr(GError) error = NULL;

  key->name = g_strdup ("A");
  key->public_key = g_strdup (f->public_a);
  key->fingerprint = vivarium_ssh_key_fingerprint (f->public_a);
  key->private_key = g_bytes_new (f->private_a, strlen (f->private_a));
  key->added_at = 1;
  g_ptr_array_add (keys, key);
  g_assert_true (vivarium_ssh_keys_save (keys, path, 0400, &error));
  g_assert_no_error (error);
  return path;
}

static gchar *
write_policy (Fixture *f)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GError) error = NULL;
  gchar *path = g_build_filename (f->dir, "policy", NULL);

  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "example.org:443", "test", &error));
  g_assert_true (vivarium_egress_policy_save (policy, path, 0644, &error));
  return path;
}

static gchar *
write_deny (Fixture *f)
{
  g_autoptr(GPtrArray) ranges = vivarium_denylist_to_strings ();
  g_autoptr(GString) text = g_string_new (NULL);
  gchar *path = g_build_filename (f->dir, "deny", NULL);

  for (guint i = 0; i < ranges->len; i++)
    g_string_append_printf (text, "%s\n", (const gchar *) ranges->pdata[i]);
  g_assert_true (g_file_set_contents (path, text->str, -1, NULL));
  return path;
}

static void
die_with_test (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static void
wait_ready (GSocket *notify)
{
  gchar buf[512] = { 0 };
  g_autoptr(GError) error = NULL;

  for (;;) {
    gssize n;
    g_assert_true (g_socket_condition_timed_wait (notify, G_IO_IN, WAIT_SEC * G_USEC_PER_SEC, NULL, &error));
    n = g_socket_receive (notify, buf, sizeof buf - 1, NULL, &error);
    g_assert_cmpint (n, >, 0);
    buf[n] = '\0';
    if (strstr (buf, "READY=1") != NULL)
      return;
  }
}

static void
proxy_start (Fixture *f)
{
  g_autofree gchar *policy = write_policy (f);
  g_autofree gchar *deny = write_deny (f);
  g_autofree gchar *keys = write_keys (f);
  g_autofree gchar *notify_path = g_build_filename (f->dir, "notify", NULL);
  g_autofree gchar *uid = g_strdup_printf ("%u", (guint) getuid ());
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (notify_path);
  g_autoptr(GSocket) notify = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_DATAGRAM, 0, NULL);
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GError) error = NULL;
  const gchar *argv[] = { g_getenv ("VIVARIUM_EGRESS"), "--dir", f->dir, "--policy", policy, "--deny", deny,
                          "--peer-uid", uid, "--log-max-entries", "100", "--ssh-keys", keys, NULL };

  g_assert_true (g_socket_bind (notify, address, FALSE, &error));
  g_subprocess_launcher_setenv (launcher, "NOTIFY_SOCKET", notify_path, TRUE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_test, NULL, NULL);
  f->proxy = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  wait_ready (notify);
  /* Read, then gone. */
  g_assert_false (g_file_test (keys, G_FILE_TEST_EXISTS));
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *a = NULL;
  g_autofree gchar *b = NULL;
  g_autofree gchar *priv = NULL;

  f->dir = g_dir_make_tmp ("test-egress-sshagent-XXXXXX", &error);
  f->keys_dir = g_dir_make_tmp ("test-egress-sshagent-keys-XXXXXX", &error);
  g_assert_no_error (error);
  make_key (f, "A");
  make_key (f, "B");
  a = g_build_filename (f->keys_dir, "A.pub", NULL);
  b = g_build_filename (f->keys_dir, "B.pub", NULL);
  priv = g_build_filename (f->keys_dir, "A", NULL);
  f->public_a = public_line (a);
  f->public_b = public_line (b);
  f->private_a = read_file (priv);
  g_free (priv);
  priv = g_build_filename (f->keys_dir, "B", NULL);
  f->private_b = read_file (priv);
  proxy_start (f);
}

static void
rm_rf (const gchar *path)
{
  const gchar *argv[] = { "rm", "-rf", path, NULL };

  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  if (f->proxy != NULL) {
    g_subprocess_force_exit (f->proxy);
    g_subprocess_wait (f->proxy, NULL, NULL);
    g_object_unref (f->proxy);
  }
  rm_rf (f->dir);
  rm_rf (f->keys_dir);
  g_free (f->dir);
  g_free (f->keys_dir);
  g_free (f->public_a);
  g_free (f->public_b);
  g_free (f->private_a);
  g_free (f->private_b);
}

static GSocket *
connect_door (Fixture *f)
{
  g_autofree gchar *path = g_build_filename (f->dir, "ssh-agent.sock", NULL);
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (path);
  g_autoptr(GError) error = NULL;
  GSocket *socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, 0, &error);

  g_assert_true (g_socket_connect (socket, address, NULL, &error));
  g_socket_set_timeout (socket, WAIT_SEC);
  return socket;
}

static void
read_exact (GSocket *socket, guint8 *buf, gsize len)
{
  gsize got = 0;

  while (got < len) {
    gssize n = g_socket_receive (socket, (gchar *) buf + got, len - got, NULL, NULL);
    g_assert_cmpint (n, >, 0);
    got += (gsize) n;
  }
}

/* One request, one answer (its body). */
static GBytes *
ask (GSocket *socket, const guint8 *body, gsize len)
{
  g_autoptr(GByteArray) msg = g_byte_array_new ();
  guint8 header[4];
  guint8 *answer;
  guint32 n;

  put_u32 (msg, (guint32) len);
  g_byte_array_append (msg, body, (guint) len);
  g_assert_cmpint (g_socket_send (socket, (const gchar *) msg->data, msg->len, NULL, NULL), ==, msg->len);
  read_exact (socket, header, 4);
  n = get_u32 (header);
  g_assert_cmpuint (n, >, 0);
  g_assert_cmpuint (n, <=, VIVARIUM_SSH_AGENT_MAX_MESSAGE);
  answer = g_malloc (n);
  read_exact (socket, answer, n);
  return g_bytes_new_take (answer, n);
}

/* One SSH string of @p at *off, bounds checked. */
static const guint8 *
take_string (const guint8 *p, gsize len, gsize *off, guint32 *n)
{
  g_assert_cmpuint (len - *off, >=, 4);
  *n = get_u32 (p + *off);
  g_assert_cmpuint (len - *off - 4, >=, *n);
  *off += 4 + *n;
  return p + *off - *n;
}

/* SSH2_AGENTC_ADD_IDENTITY with the key of an unencrypted openssh-key-v1
 * file: a request a real agent accepts (the filter must keep it away). */
static GByteArray *
add_identity_request (const gchar *private_text)
{
  g_auto(GStrv) lines = g_strsplit (private_text, "\n", -1);
  g_autoptr(GString) body = g_string_new (NULL);
  g_autofree guint8 *raw = NULL;
  GByteArray *a = g_byte_array_new ();
  const guint8 *priv, *type, *pub, *secret, *comment;
  guint32 n, priv_len, type_len, pub_len, secret_len, comment_len;
  gsize len = 0, off = 15, poff = 8;
  guint8 request = 17;

  for (guint i = 1; lines[i] != NULL && !g_str_has_prefix (lines[i], "-----END"); i++)
    g_string_append (body, lines[i]);
  raw = g_base64_decode (body->str, &len);
  g_assert_cmpmem (raw, 15, "openssh-key-v1\0", 15);
  take_string (raw, len, &off, &n);   /* cipher */
  take_string (raw, len, &off, &n);   /* kdf */
  take_string (raw, len, &off, &n);   /* kdf options */
  off += 4;                           /* one key */
  take_string (raw, len, &off, &n);   /* its public blob */
  priv = take_string (raw, len, &off, &priv_len);
  type = take_string (priv, priv_len, &poff, &type_len);
  pub = take_string (priv, priv_len, &poff, &pub_len);
  secret = take_string (priv, priv_len, &poff, &secret_len);
  comment = take_string (priv, priv_len, &poff, &comment_len);
  g_byte_array_append (a, &request, 1);
  put_string (a, type, type_len);
  put_string (a, pub, pub_len);
  put_string (a, secret, secret_len);
  put_string (a, comment, comment_len);
  return a;
}

static guint8
first_byte (GBytes *b)
{
  return ((const guint8 *) g_bytes_get_data (b, NULL))[0];
}

/* The identities answer: exactly @blob. */
static void
assert_only_identity (GSocket *socket, GBytes *blob)
{
  const guint8 request[] = { VIVARIUM_SSH_AGENTC_REQUEST_IDENTITIES };
  g_autoptr(GBytes) answer = ask (socket, request, 1);
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (answer, &len);

  g_assert_cmpuint (len, >=, 9);
  g_assert_cmpuint (p[0], ==, VIVARIUM_SSH_AGENT_IDENTITIES_ANSWER);
  g_assert_cmpuint (get_u32 (p + 1), ==, 1);
  g_assert_cmpuint (get_u32 (p + 5), ==, g_bytes_get_size (blob));
  g_assert_cmpmem (p + 9, g_bytes_get_size (blob), g_bytes_get_data (blob, NULL), g_bytes_get_size (blob));
}

/* SIGN_RESPONSE: string signature = string "ssh-ed25519", string sig[64];
 * the ed25519 public key is the blob's second string. */
static void
assert_signature (GBytes *answer, GBytes *blob, const gchar *data)
{
  const guint8 *p = g_bytes_get_data (answer, NULL);
  const guint8 *k = g_bytes_get_data (blob, NULL);
  gnutls_pubkey_t pub;
  gnutls_datum_t x = { (guint8 *) k + 4 + 11 + 4, 32 };
  gnutls_datum_t msg = { (guint8 *) data, (guint) strlen (data) };
  gnutls_datum_t sig;

  g_assert_cmpuint (g_bytes_get_size (answer), ==, 1 + 4 + 4 + 11 + 4 + 64);
  g_assert_cmpuint (get_u32 (p + 1 + 4 + 4 + 11), ==, 64);
  sig.data = (guint8 *) p + 1 + 4 + 4 + 11 + 4;
  sig.size = 64;
  g_assert_cmpint (gnutls_pubkey_init (&pub), ==, 0);
  g_assert_cmpint (gnutls_pubkey_import_ecc_raw (pub, GNUTLS_ECC_CURVE_ED25519, &x, NULL), ==, 0);
  g_assert_cmpint (gnutls_pubkey_verify_data2 (pub, GNUTLS_SIGN_EDDSA_ED25519, 0, &msg, &sig), >=, 0);
  /* And not any bytes: another message does not verify. */
  msg.size--;
  g_assert_cmpint (gnutls_pubkey_verify_data2 (pub, GNUTLS_SIGN_EDDSA_ED25519, 0, &msg, &sig), <, 0);
  gnutls_pubkey_deinit (pub);
}

static gchar *
decisions (Fixture *f)
{
  g_autofree gchar *path = g_build_filename (f->dir, "decisions.jsonl", NULL);

  return read_file (path);
}

/* The private key's base64 body appears in no file of DIR. */
static void
assert_no_private_key (Fixture *f)
{
  g_auto(GStrv) lines = g_strsplit (f->private_a, "\n", -1);
  g_autoptr(GDir) dir = g_dir_open (f->dir, 0, NULL);
  const gchar *name;

  while ((name = g_dir_read_name (dir)) != NULL) {
    g_autofree gchar *path = g_build_filename (f->dir, name, NULL);
    g_autofree gchar *text = NULL;
    if (!g_file_test (path, G_FILE_TEST_IS_REGULAR) || !g_file_get_contents (path, &text, NULL, NULL))
      continue;
    g_assert_null (strstr (text, lines[1]));
  }
}

static void
test_agent (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) socket = connect_door (f);
  g_autoptr(GBytes) blob_a = vivarium_ssh_key_public_blob (f->public_a);
  g_autoptr(GBytes) blob_b = vivarium_ssh_key_public_blob (f->public_b);
  g_autoptr(GByteArray) sign_a = sign_request (blob_a, "a session id and a user auth request");
  g_autoptr(GByteArray) sign_b = sign_request (blob_b, "a session id and a user auth request");
  g_autoptr(GByteArray) add = add_identity_request (f->private_b);
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GBytes) refused_b = NULL;
  g_autoptr(GBytes) refused_add = NULL;
  g_autofree gchar *fingerprint = vivarium_ssh_key_fingerprint (f->public_a);
  g_autofree gchar *line = g_strdup_printf ("\"reason\":\"signed with ssh key A (%s)\"", fingerprint);
  g_autofree gchar *log = NULL;

  assert_only_identity (socket, blob_a);
  answer = ask (socket, sign_a->data, sign_a->len);
  g_assert_cmpuint (first_byte (answer), ==, VIVARIUM_SSH_AGENT_SIGN_RESPONSE);
  assert_signature (answer, blob_a, "a session id and a user auth request");
  refused_b = ask (socket, sign_b->data, sign_b->len);
  g_assert_cmpuint (first_byte (refused_b), ==, VIVARIUM_SSH_AGENT_FAILURE);
  /* ADD_IDENTITY with key B's private half: refused, the agent unchanged. */
  refused_add = ask (socket, add->data, add->len);
  g_assert_cmpuint (first_byte (refused_add), ==, VIVARIUM_SSH_AGENT_FAILURE);
  assert_only_identity (socket, blob_a);
  log = decisions (f);
  g_assert_nonnull (strstr (log, line));
  g_assert_nonnull (strstr (log, "\"host\":\"ssh-agent\",\"port\":7022"));
  g_assert_nonnull (strstr (log, "ssh-agent refused a sign request for a key the session does not name"));
  g_assert_nonnull (strstr (log, "ssh-agent refused a request to add a key"));
  assert_no_private_key (f);
}

/* A length past the bound ends the connection (and is logged); the next
 * connection is served. */
static void
test_oversized (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) socket = connect_door (f);
  g_autoptr(GSocket) again = NULL;
  g_autoptr(GBytes) blob_a = vivarium_ssh_key_public_blob (f->public_a);
  const guint8 header[] = { 0x00, 0x04, 0x00, 0x01 };
  g_autofree gchar *log = NULL;
  gchar buf[16];

  g_assert_cmpint (g_socket_send (socket, (const gchar *) header, sizeof header, NULL, NULL), ==, sizeof header);
  g_assert_cmpint (g_socket_receive (socket, buf, sizeof buf, NULL, NULL), ==, 0);
  log = decisions (f);
  g_assert_nonnull (strstr (log, "ssh-agent refused a message of 0 or over 262144 bytes"));
  again = connect_door (f);
  assert_only_identity (again, blob_a);
}

/* The agent is the proxy's child: killed with it (SIGKILL, no clean-up). */
static gboolean
agent_running (const gchar *socket_path)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const gchar *name;

  while ((name = g_dir_read_name (proc)) != NULL) {
    g_autofree gchar *path = g_build_filename ("/proc", name, "cmdline", NULL);
    g_autofree gchar *cmdline = NULL;
    gsize len = 0;
    if (!g_ascii_isdigit (name[0]) || !g_file_get_contents (path, &cmdline, &len, NULL))
      continue;
    for (gsize i = 0; i + 1 < len; i++)
      if (cmdline[i] == '\0')
        cmdline[i] = ' ';
    if (strstr (cmdline, "ssh-agent") != NULL && strstr (cmdline, socket_path) != NULL)
      return TRUE;
  }
  return FALSE;
}

static void
test_agent_dies_with_proxy (Fixture *f, gconstpointer data)
{
  g_autofree gchar *socket_path = g_build_filename (f->dir, ".agent", "agent.sock", NULL);
  gint64 deadline;

  g_assert_true (agent_running (socket_path));
  g_subprocess_force_exit (f->proxy);
  g_subprocess_wait (f->proxy, NULL, NULL);
  g_clear_object (&f->proxy);
  deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (agent_running (socket_path) && g_get_monotonic_time () < deadline)
    g_usleep (50 * 1000);
  g_assert_false (agent_running (socket_path));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/egress-sshagent/filter", test_filter);
  g_test_add ("/egress-sshagent/agent", Fixture, NULL, fixture_set_up, test_agent, fixture_tear_down);
  g_test_add ("/egress-sshagent/oversized", Fixture, NULL, fixture_set_up, test_oversized, fixture_tear_down);
  g_test_add ("/egress-sshagent/dies-with-proxy", Fixture, NULL, fixture_set_up, test_agent_dies_with_proxy,
              fixture_tear_down);
  return g_test_run ();
}
