'use strict';
// A tchannel-node server for the Go tests in this folder: it serves the
// service "nodekv" on 127.0.0.1 at a port of the system's choosing, prints
// {"hostPort": "127.0.0.1:PORT"} on its standard output once it listens, and
// exits when its standard input ends (the test closes it, or dies).
//
// Endpoints (each reports, in its answer, what it saw of the call):
//   echo      raw or json: arg2/head back; arg3 (raw) or the body (json) is
//             {"arg3"|"body", "rd", "cn", "as"}: rd is the routing delegate
//             the call carried (null: none).
//   busy      an error frame with code Busy.
//   unexpected an error frame with code UnexpectedError.
//   flaky     json: body {"key", "fails"}; the first `fails` calls with a key
//             fail with UnexpectedError, the next answers ok with the heads
//             and routing delegates of every call with that key.
//   count     raw: arg3 names a method; answers how many calls it has had.
//
// With the path of keyvalue.thrift (examples/keyvalue) as its argument it
// also serves KeyValue::Get through tchannel-node's as/thrift: the value of
// key k is "value-of-k", key "missing" throws KeyNotFound; the answer's
// headers are the request's plus seen-rd and seen-cn.

var TChannel = require('tchannel');
var TChannelJSON = require('tchannel/as/json');
var TChannelAsThrift = require('tchannel/as/thrift');
var fs = require('fs');

var server = new TChannel();
var sub = server.makeSubChannel({serviceName: 'nodekv'});
var json = new TChannelJSON({logParseFailures: false});

var counts = {};
var flaky = {};

function counted(method, handler) {
    return function handle(req, res, arg2, arg3) {
        counts[method] = (counts[method] || 0) + 1;
        handler(req, res, arg2, arg3);
    };
}

function seen(req) {
    return {
        rd: req.headers.rd === undefined ? null : req.headers.rd,
        cn: req.headers.cn === undefined ? null : req.headers.cn,
        as: req.headers.as === undefined ? null : req.headers.as
    };
}

// echo serves both encodings: the raw path by hand, json through
// tchannel-node's own as/json handler.
var jsonEcho = null;
json.register({
    logger: server.logger,
    register: function register(name, handler) { jsonEcho = handler; }
}, 'echo', null, function echo(ctx, req, head, body, cb) {
    var saw = seen(req);
    saw.body = body;
    cb(null, {ok: true, head: head, body: saw});
});

sub.register('echo', counted('echo', function echo(req, res, arg2, arg3) {
    if (req.headers.as === 'json') {
        return jsonEcho(req, res, arg2, arg3);
    }
    var saw = seen(req);
    saw.arg3 = arg3.toString('utf8');
    res.headers.as = 'raw';
    res.sendOk(arg2, Buffer.from(JSON.stringify(saw)));
}));

sub.register('busy', counted('busy', function busy(req, res) {
    res.sendError('Busy', 'node server is busy');
}));

sub.register('unexpected', counted('unexpected', function unexpected(req, res) {
    res.sendError('UnexpectedError', 'node server failed');
}));

var jsonFlaky = null;
json.register({
    logger: server.logger,
    register: function register(name, handler) { jsonFlaky = handler; }
}, 'flaky', null, function handleFlaky(ctx, req, head, body, cb) {
    var calls = flaky[body.key] || (flaky[body.key] = []);
    calls.push({head: head, rd: seen(req).rd});
    if (calls.length <= body.fails) {
        return cb(new Error('flaky: failing call ' + calls.length + ' of ' + body.fails));
    }
    cb(null, {ok: true, head: null, body: calls});
});
sub.register('flaky', counted('flaky', function handle(req, res, arg2, arg3) {
    jsonFlaky(req, res, arg2, arg3);
}));

sub.register('count', function count(req, res, arg2, arg3) {
    res.headers.as = 'raw';
    res.sendOk(Buffer.alloc(0), Buffer.from(String(counts[arg3.toString('utf8')] || 0)));
});

if (process.argv[2]) {
    // strict: false, as keyvalue.thrift's fields say neither required
    // nor optional.
    var thrift = new TChannelAsThrift({
        source: fs.readFileSync(process.argv[2], 'utf8'),
        strict: false,
        logParseFailures: false
    });
    thrift.register(sub, 'KeyValue::Get', null, function get(ctx, req, head, args, cb) {
        counts['KeyValue::Get'] = (counts['KeyValue::Get'] || 0) + 1;
        var saw = seen(req);
        var out = {};
        Object.keys(head || {}).forEach(function copy(k) { out[k] = head[k]; });
        out['seen-rd'] = saw.rd === null ? '' : saw.rd;
        out['seen-cn'] = saw.cn;
        if (args.key === 'missing') {
            return cb(null, {ok: false, head: out, typeName: 'notFound', body: {key: args.key}});
        }
        cb(null, {ok: true, head: out, body: 'value-of-' + args.key});
    });
}

server.listen(0, '127.0.0.1', function onListening() {
    process.stdout.write(JSON.stringify({hostPort: server.hostPort}) + '\n');
});

process.stdin.on('data', function ignore() {});
process.stdin.on('end', function onEnd() {
    server.close();
    process.exit(0);
});
