'use strict';
// A tchannel-node client for the Go tests in this folder. It reads one call
// a line on its standard input, as JSON:
//
//   {"id": 1, "hostPort": "127.0.0.1:PORT", "service": "kv", "method": "echo",
//    "as": "raw" | "json" | "thrift", "arg2": "...", "arg3": "..." (raw,
//    strings), "head": {...}, "body": ... (json, thrift: the arguments),
//    "idl": "path of the Thrift IDL" (thrift), "timeout": ms,
//    "rd": "..." (optional)}
//
// and prints one line for each answer, in the order they come:
//
//   {"id": 1, "ok": true|false, "arg2": "...", "arg3": "..." (raw),
//    "head": {...}, "body": ... (json, thrift; a thrift exception is
//    {"type": its name in the IDL's throws, "value": its fields}),
//    "headers": {...} (transport),
//    "err": {"type", "codeName", "message"} (a call that failed)}
//
// It exits when its standard input ends.

var readline = require('readline');
var TChannel = require('tchannel');
var TChannelJSON = require('tchannel/as/json');
var TChannelAsThrift = require('tchannel/as/thrift');
var fs = require('fs');

var client = new TChannel();
var subs = {};
var json = new TChannelJSON({logParseFailures: false});
var thrifts = {}; // by IDL path
var inflight = 0;
var ended = false;

function reply(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function errorOf(err) {
    return {
        type: err.type || null,
        codeName: err.codeName || null,
        message: err.message || String(err)
    };
}

// call sends cmd once the connection to its peer has finished its
// handshake: tchannel-node makes a request on an identified connection only.
function call(cmd) {
    inflight++;
    client.waitForIdentified({host: cmd.hostPort}, function identified(err) {
        if (err) {
            return done({id: cmd.id, ok: false, err: errorOf(err)});
        }
        send(cmd);
    });
}

function send(cmd) {
    var headers = {cn: 'node-client'};
    if (cmd.rd) {
        headers.rd = cmd.rd;
    }
    // tchannel-node calls through a sub-channel of the service, one each.
    var sub = subs[cmd.service] || (subs[cmd.service] = client.makeSubChannel({serviceName: cmd.service}));
    var req = sub.request({
        serviceName: cmd.service,
        host: cmd.hostPort,
        hasNoParent: true,
        timeout: cmd.timeout || 2000,
        headers: headers,
        // One attempt: the tests look at what each call got.
        retryFlags: {never: true, onConnectionError: false, onTimeout: false}
    });
    if (cmd.as === 'thrift') {
        var thrift = thrifts[cmd.idl] || (thrifts[cmd.idl] = new TChannelAsThrift({
            source: fs.readFileSync(cmd.idl, 'utf8'),
            strict: false,
            logParseFailures: false
        }));
        thrift.send(req, cmd.method, cmd.head || {}, cmd.body || {}, function onThrift(err, res) {
            if (err) {
                return done({id: cmd.id, ok: false, err: errorOf(err)});
            }
            var body = res.body;
            if (!res.ok) {
                body = {type: res.typeName || null, value: res.body};
            }
            done({id: cmd.id, ok: res.ok, head: res.head, body: body, headers: res.headers});
        });
        return;
    }
    if (cmd.as === 'json') {
        json.send(req, cmd.method, cmd.head || null, cmd.body === undefined ? null : cmd.body, function onJSON(err, res) {
            if (err) {
                return done({id: cmd.id, ok: false, err: errorOf(err)});
            }
            done({id: cmd.id, ok: res.ok, head: res.head, body: res.ok ? res.body : errorOf(res.body), headers: res.headers});
        });
        return;
    }
    req.headers.as = 'raw';
    req.send(cmd.method, cmd.arg2 || '', cmd.arg3 || '', function onRaw(err, res, arg2, arg3) {
        if (err) {
            return done({id: cmd.id, ok: false, err: errorOf(err)});
        }
        done({id: cmd.id, ok: res.ok, arg2: String(arg2), arg3: String(arg3), headers: res.headers});
    });
}

function done(obj) {
    reply(obj);
    inflight--;
    if (ended && inflight === 0) {
        finish();
    }
}

function finish() {
    client.close(function closed() { process.exit(0); });
}

var lines = readline.createInterface({input: process.stdin});
lines.on('line', function onLine(line) {
    if (line.trim() === '') {
        return;
    }
    var cmd;
    try {
        cmd = JSON.parse(line);
    } catch (err) {
        return reply({id: null, ok: false, err: {type: 'bad-command', codeName: null, message: err.message}});
    }
    call(cmd);
});
lines.on('close', function onClose() {
    ended = true;
    if (inflight === 0) {
        finish();
    }
});
