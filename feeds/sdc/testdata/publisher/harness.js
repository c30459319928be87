/*
 * harness.js: the real changefeed Publisher (npm changefeed@1.5.4, what
 * VMAPI ships) on a restify 4 server built as VMAPI builds its own, for
 * cns's interop test (feeds/sdc/publisher_interop_test.go). Run it on
 * VMAPI's runtime, Node 6.17.1.
 *
 *   node harness.js [port]      listens on 127.0.0.1:port (0: any port)
 *
 * stdout: one JSON event a line, for the test to wait on:
 *   {"event":"ready","port":N}          moray bucket set up, publisher polling
 *   {"event":"request","method":"GET","path":"/changefeeds","upgrade":false}
 *                                       every HTTP request, before any handler
 *   {"event":"registration"}            the publisher accepted a v1 listener
 *   {"event":"put","uuid":U}            a change item is in the bucket
 *   {"event":"sent"}                    the publisher sent an item to a listener
 * stdin: one JSON command a line:
 *   {"cmd":"publish","subResources":[...],"vm":{...}}
 *                         VMAPI's publishChange (lib/common/util.js): the item
 *                         {changeKind:{resource:'vm',subResources},
 *                         changedResourceId:vm.uuid, resourceObject:vm}
 *   {"cmd":"exit"}        exit 0, as a restarted VMAPI does
 * stderr: the bunyan logs.
 */

var EventEmitter = require('events').EventEmitter;
var bunyan = require('bunyan');
var changefeed = require('changefeed');
var readline = require('readline');
var restify = require('restify');
var util = require('util');

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

/*
 * InMemoryMoray is the part of node-moray's client that the Publisher calls
 * (lib/publisher.js): getBucket, createBucket, putObject, findObjects,
 * delObject, on('error'), toString. A real moray stores objects as JSON, so
 * every put and every record is a copy, and findObjects answers with an
 * emitter of 'record' ({key, value}) and 'end' events, asynchronously.
 */
function InMemoryMoray() {
    EventEmitter.call(this);
    this.buckets = {};
}
util.inherits(InMemoryMoray, EventEmitter);

InMemoryMoray.prototype.toString = function () {
    return '[object InMemoryMoray]';
};

InMemoryMoray.prototype.getBucket = function (name, cb) {
    var self = this;
    setImmediate(function () {
        if (self.buckets[name]) {
            cb(null, {name: name});
            return;
        }
        /* The publisher tests the error by name, then creates the bucket. */
        var err = new Error(name + ' does not exist');
        err.name = 'BucketNotFoundError';
        cb(err);
    });
};

InMemoryMoray.prototype.createBucket = function (name, config, cb) {
    this.buckets[name] = this.buckets[name] || {};
    setImmediate(cb, null);
};

InMemoryMoray.prototype.putObject = function (bucket, key, value, cb) {
    this.buckets[bucket][key] = JSON.stringify(value);
    setImmediate(cb, null);
};

InMemoryMoray.prototype.delObject = function (bucket, key, cb) {
    delete this.buckets[bucket][key];
    setImmediate(cb, null);
};

/*
 * The publisher's only filters are "(published=no)" (the 2 s publishing
 * poll) and "(!(published=no))" (the garbage collector).
 */
InMemoryMoray.prototype.findObjects = function (bucket, filter) {
    var m = /^\((!\()?published=([^)]*)\)\)?$/.exec(filter);
    if (!m) {
        throw new Error('InMemoryMoray: unsupported filter ' + filter);
    }
    var negate = Boolean(m[1]);
    var want = m[2];
    var objects = this.buckets[bucket];
    var req = new EventEmitter();
    setImmediate(function () {
        Object.keys(objects).forEach(function (key) {
            var value = JSON.parse(objects[key]);
            if ((value.published === want) !== negate) {
                req.emit('record', {bucket: bucket, key: key, value: value});
            }
        });
        req.emit('end');
    });
    return req;
};

/* VMAPI's formatter (lib/vmapi.js formatJSON): JSON.stringify, no guard. */
function formatJSON(req, res, body, cb) {
    if (body instanceof Error) {
        res.statusCode = body.statusCode || 500;
        body = body.body ? body.body : {message: body.message};
    }
    var data = JSON.stringify(body);
    res.setHeader('Content-Length', Buffer.byteLength(data));
    res.setHeader('Content-Type', 'application/json');
    cb(null, data);
}

function main() {
    var port = parseInt(process.argv[2] || '0', 10);
    var log = bunyan.createLogger({name: 'publisher-harness',
        level: 'warn', stream: process.stderr});

    /*
     * VMAPI's server options that matter here: no handleUpgrades (the
     * publisher hooks the proxied 'upgrade' event itself) and
     * handleUncaughtExceptions: false, so a throwing handler (GET
     * /changefeeds/stats once a listener is registered) ends the process.
     */
    var server = restify.createServer({
        name: 'VMAPI/interop-harness',
        log: log,
        formatters: {'application/json': formatJSON, '*/*': formatJSON},
        handleUncaughtExceptions: false
    });

    /* First listeners, so a request is logged before any handler throws. */
    function logRequest(upgrade) {
        return function (req) {
            emit({event: 'request', method: req.method,
                path: req.url.split('?')[0], upgrade: upgrade});
        };
    }
    server.server.prependListener('request', logRequest(false));
    server.server.prependListener('upgrade', logRequest(true));

    /* VMAPI's changefeed configuration (sapi_manifests/vmapi/template). */
    var publisher = changefeed.createPublisher({
        log: log,
        maxAge: 120,
        moray: {bucketName: 'vmapi_changefeed', client: new InMemoryMoray()},
        resources: [ {
            resource: 'vm',
            subResources: ['alias', 'customer_metadata', 'destroyed',
                'internal_metadata', 'nics', 'owner_uuid', 'server_uuid',
                'state', 'tags'],
            bootstrapRoute: '/vms'
        } ]
    });
    publisher.on('registration', function () {
        emit({event: 'registration'});
    });
    publisher.on('item-published', function () {
        emit({event: 'sent'});
    });
    publisher.mountRestifyServerRoutes(server);

    /* As VMAPI's server.js: start polling once the bucket is set up. */
    publisher.on('moray-ready', function () {
        publisher.start();
        server.listen(port, '127.0.0.1', function () {
            emit({event: 'ready', port: server.address().port});
        });
    });

    var rl = readline.createInterface({input: process.stdin});
    rl.on('line', function (line) {
        var c = JSON.parse(line);
        switch (c.cmd) {
        case 'publish':
            var item = {
                changeKind: {resource: 'vm', subResources: c.subResources},
                changedResourceId: c.vm.uuid,
                resourceObject: c.vm
            };
            publisher.publish(item, function (err) {
                if (err) {
                    throw err;
                }
                emit({event: 'put', uuid: c.vm.uuid});
            });
            break;
        case 'exit':
            process.exit(0);
            break;
        default:
            throw new Error('unknown command ' + line);
        }
    });
    /* The test is gone: do not outlive it. */
    rl.on('close', function () {
        process.exit(0);
    });
}

main();
