#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The far side of the system tests' pretend internet (lib.sh's
# pretend_internet_up runs it inside its own network namespace): a plain HTTP
# server on port 80, an HTTPS server on 443 (the test's own CA signed its
# certificate), both on every address of the namespace, and a DNS server on
# DNS_ADDR:53 (UDP and TCP) that writes down every name it is asked for. It
# keeps what it saw in DIR, one line per event, so a test can prove that a
# refused request never got this far:
#
#   DIR/connections.log  "accept http|https LOCAL_ADDR:PORT PEER_ADDR"
#   DIR/requests.log     "http|https LOCAL_ADDR SNI HOST PATH STATUS BYTES"
#   DIR/dns.log          "NAME QTYPE udp|tcp"
#   DIR/tunnels.log      "HOST:PORT"
#   DIR/auth.log         "http|https HOST PATH AUTHORIZATION" (the header's
#                        value as it arrived, "-" without one: the secrets
#                        test's proof of what the server saw)
#   DIR/bodies.log       "http|https HOST PATH RECEIVED/DECLARED BODY" (a
#                        POST's body as it arrived, backslash-escaped)
#
# On port 3128 a plain CONNECT proxy (no policy: it tunnels to any of the
# names given, or an address) lets a test prove its own CONNECT client works,
# so that a refusal by the product's proxy is the product's.
#
#   pretend-internet.py DIR TOKEN CERT KEY DNS_ADDR NAME=ADDR...
#
# GET /token answers "TOKEN scheme=… host=… sni=… addr=…"; GET /big answers
# BIG_BYTES bytes (for the byte limits); POST /token (a body of at most
# BODY_MAX bytes) answers as GET does. The DNS server answers A for the
# names given, an empty answer for their other types, NXDOMAIN for the rest.
# Prints "ready" once every socket is bound.

import http.server
import os
import socket
import socketserver
import ssl
import struct
import sys
import threading

BIG_BYTES = 4 * 1024 * 1024
IO_TIMEOUT = 10
BODY_MAX = 65536
DNS_MAX = 4096

directory, token, cert, key, dns_addr = sys.argv[1:6]
names = dict(arg.split('=', 1) for arg in sys.argv[6:])
log_lock = threading.Lock()


def log(name, *fields):
    line = ' '.join(str(f) if f not in (None, '') else '-' for f in fields)
    with log_lock, open(os.path.join(directory, name), 'a') as f:
        f.write(line.replace('\n', ' ') + '\n')


class Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, the server closes it after.
    server_version = 'pretend-internet'

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        try:
            length = int(self.headers.get('Content-Length', '0'))
        except ValueError:
            length = -1
        if length < 0 or length > BODY_MAX:
            self.send_error(413)
            return
        try:
            body = self.rfile.read(length)
        except OSError:
            body = b''
        log('bodies.log', self.server.scheme, self.headers.get('Host', ''), self.path,
            '%d/%d' % (len(body), length), body.decode('latin-1').encode('unicode_escape').decode('ascii'))
        self.do_GET()

    def do_GET(self):
        scheme = self.server.scheme
        sni = getattr(self.connection, 'vt_sni', None) if scheme == 'https' else None
        host = self.headers.get('Host', '')
        local = self.connection.getsockname()[0]
        log('auth.log', scheme, host, self.path, self.headers.get('Authorization', ''))
        if self.path.split('?', 1)[0] == '/token':
            body = ('%s scheme=%s host=%s sni=%s addr=%s\n' % (token, scheme, host, sni or '-', local)).encode()
        elif self.path == '/big':
            body = None
        else:
            self.send_error(404)
            log('requests.log', scheme, local, sni, host, self.path, 404, 0)
            return
        size = len(body) if body is not None else BIG_BYTES
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain' if body is not None else 'application/octet-stream')
        self.send_header('Content-Length', str(size))
        self.end_headers()
        sent = 0
        try:
            if body is not None:
                self.wfile.write(body)
                sent = len(body)
            else:
                chunk = b'0123456789abcdef' * 4096
                while sent < size:
                    self.wfile.write(chunk)
                    sent += len(chunk)
        except OSError:
            pass
        log('requests.log', scheme, local, sni, host, self.path, 200, sent)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port, scheme, context=None):
        self.scheme = scheme
        self.context = context
        super().__init__(('0.0.0.0', port), Handler)

    def finish_request(self, request, client_address):
        # Runs in the connection's own thread: a slow or broken handshake
        # holds up no one else.
        request.settimeout(IO_TIMEOUT)
        local = request.getsockname()
        log('connections.log', 'accept', self.scheme, '%s:%d' % local, client_address[0])
        if self.context is not None:
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as e:
                log('requests.log', self.scheme, local[0], None, None, '(handshake)', 'failed', 0)
                sys.stderr.write('TLS handshake with %s failed: %s\n' % (client_address[0], e))
                return
        super().finish_request(request, client_address)


def tls_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    # busybox's ssl_client (wget's HTTPS in the tiny guest) sends no
    # signature_algorithms extension, which TLS 1.2 reads as SHA-1 only;
    # OpenSSL 3 allows that at security level 0 alone.
    ctx.set_ciphers('DEFAULT:@SECLEVEL=0')

    def remember_sni(sock, name, _ctx):
        sock.vt_sni = name
    ctx.sni_callback = remember_sni
    return ctx


# --- a plain CONNECT proxy -------------------------------------------------

class Tunnel(socketserver.BaseRequestHandler):
    def handle(self):
        # Byte by byte: nothing after the head may be read into a buffer.
        conn = self.request
        conn.settimeout(IO_TIMEOUT)
        head = b''
        while not head.endswith(b'\r\n\r\n') and len(head) < 16384:
            byte = conn.recv(1)
            if not byte:
                return
            head += byte
        line = head.decode('latin-1').split('\r\n', 1)[0].split()
        if len(line) < 2 or line[0] != 'CONNECT' or ':' not in line[1]:
            conn.sendall(b'HTTP/1.1 400 Bad Request\r\n\r\n')
            return
        host, port = line[1].rsplit(':', 1)
        log('tunnels.log', line[1])
        try:
            upstream = socket.create_connection((names.get(host, host), int(port)), timeout=IO_TIMEOUT)
        except (OSError, ValueError):
            conn.sendall(b'HTTP/1.1 502 Bad Gateway\r\n\r\n')
            return
        conn.sendall(b'HTTP/1.1 200 Connection established\r\n\r\n')
        t = threading.Thread(target=copy, args=(conn, upstream), daemon=True)
        t.start()
        copy(upstream, conn)
        t.join(IO_TIMEOUT)
        upstream.close()


def copy(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


# --- DNS -------------------------------------------------------------------

def parse_question(q):
    i, labels = 12, []
    while i < len(q) and q[i] != 0:
        if q[i] & 0xc0:
            return None
        labels.append(q[i + 1:i + 1 + q[i]].decode('ascii', 'replace'))
        i += 1 + q[i]
    if len(q) < 12 or i + 5 > len(q):
        return None
    qtype = struct.unpack('!H', q[i + 1:i + 3])[0]
    return '.'.join(labels).lower(), qtype, q[12:i + 5]


def answer(q, proto):
    parsed = parse_question(q)
    if parsed is None:
        log('dns.log', '(unparsable)', 0, proto)
        return None
    name, qtype, question = parsed
    log('dns.log', name, qtype, proto)
    qid = q[:2]
    if name in names and qtype == 1:
        rr = b'\xc0\x0c' + struct.pack('!HHIH', 1, 1, 5, 4) + socket.inet_aton(names[name])
        return qid + struct.pack('!HHHHH', 0x8180, 1, 1, 0, 0) + question + rr
    rcode = 0 if name in names else 3
    return qid + struct.pack('!HHHHH', 0x8180 | rcode, 1, 0, 0, 0) + question


class DnsUdp(socketserver.BaseRequestHandler):
    def handle(self):
        a = answer(self.request[0][:DNS_MAX], 'udp')
        if a:
            self.request[1].sendto(a, self.client_address)


class DnsTcp(socketserver.StreamRequestHandler):
    timeout = IO_TIMEOUT

    def handle(self):
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            q = self.rfile.read(struct.unpack('!H', head)[0])
            a = answer(q, 'tcp')
            if a is None:
                return
            self.wfile.write(struct.pack('!H', len(a)) + a)


class UdpServer(socketserver.ThreadingUDPServer):
    daemon_threads = True
    allow_reuse_address = True


class TcpServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    servers = [Server(80, 'http'), Server(443, 'https', tls_context()),
               UdpServer((dns_addr, 53), DnsUdp), TcpServer((dns_addr, 53), DnsTcp),
               TcpServer(('0.0.0.0', 3128), Tunnel)]
    for name in ('connections.log', 'requests.log', 'dns.log', 'tunnels.log', 'auth.log', 'bodies.log'):
        open(os.path.join(directory, name), 'a').close()
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print('ready', flush=True)
    servers[0].serve_forever()


main()
