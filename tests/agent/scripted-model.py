#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A scripted model server: speaks the OpenAI-compatible chat-completions wire
# protocol (what Ollama, llama.cpp's server and vLLM serve), replays a written
# conversation, and ASSERTS on every request it receives: the path, the model
# the gateway forced, the Authorization header the gateway added, and the tool
# results the agent sent back since the model's previous turn.
#
#   scripted-model.py --port N --conversations FILE --failures FILE --log FILE
#
# FILE: {"model": M, "authorization": "Bearer K" or null,
#        "conversations": {NAME: [TURN, ...]}}
# A request belongs to the conversation whose "[conversation: NAME]" tag its
# first user message carries; its turn is the number of assistant messages it
# holds (so the server keeps no state). TURN: {"expect": [substrings of the
# new messages], "expect_fields": {key: value in the last tool result's JSON},
# "reply": assistant message, "repeat": N (this turn serves N requests),
# "delay": seconds to wait before answering (logged first)}.
# In "reply", "{n}" in tool-call arguments becomes the turn number and
# {"big": N} as arguments becomes a JSON object of N bytes.
# Every failed assertion is appended to --failures and answered with 500.
# --model / --no-authorization / --authorization override the file's "model" /
# "authorization". --bind ADDRESS (default 127.0.0.1); --tls-cert and
# --tls-key serve HTTPS with that certificate (the model "by name" of a test).

import argparse
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
script = None
lock = threading.Lock()


def note(path, line):
    with lock, open(path, 'a') as f:
        f.write(line + '\n')


def turn_for(conv, index):
    at = 0
    for turn in conv:
        n = turn.get('repeat', 1)
        if index < at + n:
            return turn
        at += n
    return None


def render_reply(turn, index):
    reply = json.loads(json.dumps(turn['reply']))
    for call in reply.get('tool_calls', []):
        call.setdefault('type', 'function')
        call['id'] = '%s-%d' % (call.get('id', 'call'), index)
        a = call['function'].get('arguments')
        if isinstance(a, dict) and 'big' in a:
            call['function']['arguments'] = json.dumps({'path': '/project/big', 'content': 'A' * a['big']})
        elif isinstance(a, str):
            call['function']['arguments'] = a.replace('{n}', str(index))
        else:
            call['function']['arguments'] = json.dumps(a).replace('{n}', str(index))
    reply.setdefault('role', 'assistant')
    reply.setdefault('content', '')
    return reply


def check(req, headers, path):
    """Returns (conversation name, turn index, turn) or raises AssertionError."""
    assert path == '/v1/chat/completions', 'path %r' % path
    assert req.get('model') == script['model'], 'model %r, not the forced %r' % (req.get('model'), script['model'])
    auth = headers.get('Authorization')
    assert auth == script.get('authorization'), 'Authorization header %r' % (auth and auth[:12] + '...')
    msgs = req['messages']
    assert msgs[0]['role'] == 'system', 'the first message is not the system prompt'
    user = next(m for m in msgs if m['role'] == 'user')['content']
    names = [n for n in script['conversations'] if '[conversation: %s]' % n in user]
    assert len(names) == 1, 'no conversation tag in the instructions'
    name = names[0]
    index = sum(1 for m in msgs if m['role'] == 'assistant')
    turn = turn_for(script['conversations'][name], index)
    assert turn is not None, '%s: the agent asked for turn %d, past the end of the conversation' % (name, index)
    last_assistant = max([i for i, m in enumerate(msgs) if m['role'] == 'assistant'] or [-1])
    new = msgs[last_assistant + 1:]
    text = '\n'.join(str(m.get('content', '')) for m in new)
    for want in turn.get('expect', []):
        assert want in text, '%s turn %d: expected %r in %r' % (name, index, want, text[:600])
    if 'expect_fields' in turn:
        tools = [m for m in new if m['role'] == 'tool']
        assert tools, '%s turn %d: no tool result' % (name, index)
        got = json.loads(tools[-1]['content'])
        for k, v in turn['expect_fields'].items():
            assert got.get(k) == v, '%s turn %d: %s is %r, expected %r' % (name, index, k, got.get(k), v)
    ids = {c['id'] for m in msgs if m['role'] == 'assistant' for c in m.get('tool_calls', [])}
    for m in msgs:
        if m['role'] == 'tool':
            assert m.get('tool_call_id') in ids, '%s turn %d: a tool result for an unknown call' % (name, index)
    return name, index, turn


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *a):
        pass

    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == '/v1/models':
            note(args.log, json.dumps({'path': self.path, 'authorization': self.headers.get('Authorization') is not None,
                                       'local': self.connection.getsockname()[0]}))
            self.answer(200, {'object': 'list', 'data': [{'id': script['model'], 'object': 'model'}]})
        else:
            note(args.failures, 'GET %s reached the model server' % self.path[:100])
            self.answer(404, {'error': {'message': 'no'}})

    def do_POST(self):
        length = int(self.headers.get('Content-Length', '0'))
        raw = self.rfile.read(length)
        try:
            req = json.loads(raw)
            name, index, turn = check(req, self.headers, self.path)
        except (AssertionError, ValueError, KeyError, StopIteration) as e:
            note(args.failures, 'request to %s: %s' % (self.path[:100], e))
            self.answer(500, {'error': {'message': 'scripted model: %s' % e}})
            return
        # What the gateway forwarded besides the conversation: its member
        # allow-list and clamps are checked on these.
        note(args.log, json.dumps({'conversation': name, 'turn': index, 'bytes': length,
                                   'local': self.connection.getsockname()[0],
                                   'members': sorted(req), 'n': req.get('n'), 'max_tokens': req.get('max_tokens')}))
        # A slow model, for a test to do something while a request is out.
        time.sleep(turn.get('delay', 0))
        reply = render_reply(turn, index)
        self.answer(200, {
            'id': 'chatcmpl-%s-%d' % (name, index), 'object': 'chat.completion', 'model': script['model'],
            'choices': [{'index': 0, 'message': reply,
                         'finish_reason': 'tool_calls' if reply.get('tool_calls') else 'stop'}],
            'usage': {'prompt_tokens': 100, 'completion_tokens': 10, 'total_tokens': 110},
        })


def main():
    global args, script
    p = argparse.ArgumentParser()
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--conversations', required=True)
    p.add_argument('--failures', required=True)
    p.add_argument('--log', required=True)
    p.add_argument('--model')
    p.add_argument('--no-authorization', action='store_true')
    p.add_argument('--authorization')
    p.add_argument('--bind', default='127.0.0.1')
    p.add_argument('--tls-cert')
    p.add_argument('--tls-key')
    args = p.parse_args()
    script = json.load(open(args.conversations))
    if args.model:
        script['model'] = args.model
    if args.no_authorization:
        script['authorization'] = None
    if args.authorization:
        script['authorization'] = args.authorization
    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print('ready', flush=True)
    server.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
