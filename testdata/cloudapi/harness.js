/*
 * harness.js: the Triton services that call cns's REST API, calling it as
 * they do, for cns's test (cloudapi_test.go): CloudAPI's own client (npm
 * sdc-clients@13.0.5, CloudAPI's pin) over a cueball@2.10.1 HttpAgent
 * configured as CloudAPI's SAPI template configures it, and sdc-docker's
 * calls, each followed by what that service does with the answer, so that
 * the test asserts what a user then sees. Run it on CloudAPI's runtime,
 * Node 6.17.1.
 *
 *   node harness.js <cns API host:port> [pingIntervalMs]
 *
 * The sources replicated (TritonDataCenter/sdc-cloudapi at 10c3963,
 * joyent/sdc-docker at b27c106) are named at each operation.
 *
 * stdin: one JSON request a line, {"id": N, "op": ..., ...}; stdout: one
 * JSON answer a line, {"id": N, ...}; first {"event": "ready"}. stderr:
 * the logs.
 */

var bunyan = require('bunyan');
var cueball = require('cueball');
var readline = require('readline');
var SDC = require('sdc-clients');
var vasync = require('vasync');

var cnsAddr = process.argv[2];
var colon = cnsAddr.lastIndexOf(':');
var cnsHost = cnsAddr.slice(0, colon);
var cnsPort = parseInt(cnsAddr.slice(colon + 1), 10);
var pingInterval = parseInt(process.argv[3] || '30000', 10);

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

/*
 * The agent's log: warnings and up to stderr, and every record counted by
 * its message, so that the test sees cueball's own view of its health
 * checks ("health check ok, releasing", "got a 5xx code, closing", "check
 * failed").
 */
var seen = {};
var log = bunyan.createLogger({
    name: 'cloudapi',
    streams: [
        {level: 'warn', stream: process.stderr},
        {level: 'debug', type: 'raw', stream: {write: function (rec) {
            seen[rec.msg] = (seen[rec.msg] || 0) + 1;
        }}}
    ]
});

/*
 * CloudAPI's agent: sapi_manifests/cloudapi/template lines 83-113
 * (cueballHttpAgent), built by lib/app.js line 183 and given to the CNS
 * client at line 210. Two differences, both because cns listens on
 * 127.0.0.1:<port> here rather than on port 80 of cns.<dc>.<dns_domain>
 * found through binder: initialDomains names that address only (cueball
 * keys its pools by the request's host, so the pool CloudAPI makes at
 * start for cns_domain is this one), and defaultPort is the port (CloudAPI
 * gets 80 by default); the resolvers are never asked, an IP address needs
 * none. The health checks' interval is the template's 30000 ms unless the
 * test scales time down. A log is passed so that cueball does not write
 * to stdout.
 */
var agent = new cueball.HttpAgent({
    resolvers: ['binder.coal.example.com'],
    initialDomains: [cnsHost],
    defaultPort: cnsPort,
    spares: 4,
    maximum: 100,
    recovery: {
        default: {
            timeout: 2000,
            maxTimeout: 8000,
            retries: 5,
            delay: 250,
            maxDelay: 1000
        }
    },
    tcpKeepAliveInitialDelay: 10000,
    ping: '/ping',
    pingInterval: pingInterval,
    log: log
});

/* CloudAPI's client: lib/app.js line 153, {url: 'http://' + cns_domain}. */
var cns = new SDC.CNS({url: 'http://' + cnsAddr, agent: agent, log: log});

/* sdc-docker's client: lib/docker.js line 193, no agent. */
var dockerCNS = new SDC.CNS({url: 'http://' + cnsAddr, log: log});

/* sdc-cloudapi lib/machines.js line 1538. */
function dnsify(str) {
    return (str.toLowerCase().replace(/[^a-z0-9-]+/g, '-'));
}

/* An error as the service reports it: its restify name and message. */
function errText(err) {
    return (err.name + ': ' + err.message);
}

/*
 * GetMachine's _getCNSNames, lib/machines.js lines 1275-1296: only for an
 * account with triton_cns_enabled 'true'; a 404 shows no names; any other
 * error fails the request with InternalError "Unable to contact the Triton
 * CNS API".
 */
function getMachine(req, cb) {
    var machine = {};
    if (req.account.triton_cns_enabled !== 'true') {
        cb({machine: machine});
        return;
    }
    var opts = {headers: {'x-request-id': 'harness-' + req.id}};
    cns.getVM(req.vm, opts, function (err, obj) {
        if (err && err.statusCode === 404) {
            machine.dns_names = [];
            cb({machine: machine});
            return;
        } else if (err) {
            cb({error: 'InternalError: Unable to contact the Triton CNS API', cause: errText(err)});
            return;
        }
        machine.dns_names = obj.names;
        cb({machine: machine});
    });
}

/*
 * CreateMachine, lib/machines.js lines 1816-1878: for an account with
 * triton_cns_enabled 'true' and no dns_domain given, the networks' UUIDs
 * (ipv4_uuid, ipv6_uuid, uuid) are sent; NotFoundError or
 * ResourceNotFoundError is "the endpoint is not supported" and the VM is
 * provisioned without a DNS domain; any other error fails the provisioning
 * with InternalError "Unable to contact the Triton CNS API"; else the
 * first inst. suffix becomes dns_domain and dnsify(alias) the hostname.
 */
function createMachine(req, cb) {
    var opts = {owner_uuid: req.owner_uuid, alias: req.alias, networks: req.networks};
    if (req.account.triton_cns_enabled !== 'true' || opts.dns_domain) {
        cb({vm: opts});
        return;
    }
    var ropts = {};
    ropts.headers = {
        'x-request-id': 'harness-' + req.id,
        'accept-version': '~1'
    };
    var netUuids = [];
    opts.networks.forEach(function (net) {
        if (net.ipv4_uuid) {
            netUuids.push(net.ipv4_uuid);
        }
        if (net.ipv6_uuid) {
            netUuids.push(net.ipv6_uuid);
        }
        if (net.uuid && netUuids.indexOf(net.uuid) === -1) {
            netUuids.push(net.uuid);
        }
    });
    cns.getSuffixesForVM(opts.owner_uuid, netUuids, ropts, function (err, obj) {
        if (err && (err.name === 'NotFoundError' ||
            err.name === 'ResourceNotFoundError')) {
            cb({vm: opts, warning: 'endpoint not supported', cause: errText(err)});
            return;
        }
        if (err) {
            cb({error: 'InternalError: Unable to contact the Triton CNS API', cause: errText(err)});
            return;
        }
        var sufs = obj.suffixes.filter(function (suf) {
            return (suf.indexOf('inst.') === 0);
        });
        if (sufs.length > 0) {
            opts.dns_domain = sufs[0];
            opts.hostname = dnsify(opts.alias);
        }
        cb({vm: opts, suffixes: obj.suffixes});
    });
}

/*
 * ListNetworks, lib/endpoints/networks.js lines 267-291: each network
 * (translated: its uuid as id) is asked about for the account; the
 * callback reads suf.suffixes before looking at the error, so any error
 * throws a TypeError out of the client's callback (CloudAPI's process
 * dies of it); the harness catches it to report it.
 */
function listNetworks(req, cb) {
    var networks = req.networks;
    var died = false;
    function resolveSuffix(n, rcb) {
        var account = req.account.uuid;
        var nets = [n.id];
        cns.getSuffixesForVM(account, nets, function (err, suf) {
            if (died) {
                return;
            }
            try {
                n.suffixes = suf.suffixes;
            } catch (e) {
                died = true; /* CloudAPI's process would be gone */
                cb({thrown: e.name + ': ' + e.message, cause: err ? errText(err) : ''});
                return;
            }
            return rcb(err, n);
        });
    }
    if (req.account.triton_cns_enabled !== 'true') {
        cb({networks: networks});
        return;
    }
    vasync.forEachParallel({
        'func': resolveSuffix,
        'inputs': networks
    }, function (err, results) {
        if (err) {
            cb({networks: networks, warning: 'failed to retrieve DNS suffixes from CNS REST API'});
            return;
        }
        cb({networks: results.successes});
    });
}

/*
 * GetNetwork, lib/endpoints/networks.js lines 319-331: an error leaves the
 * network without suffixes (a warning in the log).
 */
function getNetwork(req, cb) {
    var network = req.network;
    if (req.account.triton_cns_enabled !== 'true') {
        cb({network: network});
        return;
    }
    cns.getSuffixesForVM(req.account.uuid, [network.id], function (err, suf) {
        if (err) {
            cb({network: network, warning: 'failed to retrieve DNS suffixes from CNS REST API', cause: errText(err)});
            return;
        }
        network.suffixes = suf.suffixes;
        cb({network: network});
    });
}

/*
 * sdc-docker's getCnsDnsSearchEntriesForNetworks, lib/backends/sdc/
 * networks.js lines 832-904, called by addCnsEntriesToPayload
 * (lib/backends/sdc/containers.js) at docker run: an error other than
 * NotFoundError/ResourceNotFoundError fails the run with InternalError
 * "Triton CNS API failed"; else the suffixes become docker:dnssearch
 * entries.
 */
function dockerDNSSearch(req, cb) {
    if (req.account.triton_cns_enabled !== 'true') {
        cb({dnssearch: []});
        return;
    }
    var cnsOpts = {
        headers: {
            'x-request-id': 'harness-' + req.id,
            'accept-version': '~1'
        }
    };
    var netUuids = [];
    req.networks.forEach(function (network) {
        [network.ipv4_uuid, network.ipv6_uuid, network.uuid].forEach(function (u) {
            if (u && netUuids.indexOf(u) === -1) {
                netUuids.push(u);
            }
        });
    });
    dockerCNS.getSuffixesForVM(req.account.uuid, netUuids, cnsOpts, function (err, result) {
        if (err) {
            if (err.name === 'NotFoundError' ||
                err.name === 'ResourceNotFoundError') {
                cb({dnssearch: [], warning: 'endpoint not supported'});
                return;
            }
            cb({error: 'InternalError: Triton CNS API failed', cause: errText(err)});
            return;
        }
        if (!result.suffixes || result.suffixes.length === 0) {
            cb({dnssearch: []});
            return;
        }
        cb({dnssearch: result.suffixes});
    });
}

/*
 * sdc-docker's connection watcher (lib/docker.js lines 318-333,
 * lib/connwatcher.js): cns.ping every pingIntervalSecs (10 s; the test
 * passes a scaled interval); a failed ping marks cns unavailable, and
 * every docker request then fails with ServiceDegradedError.
 */
function dockerPing(req, cb) {
    var results = {ok: 0, failed: 0, errors: []};
    var left = req.count;
    function ping() {
        dockerCNS.ping(function (err) {
            if (err) {
                results.failed++;
                results.errors.push(errText(err));
            } else {
                results.ok++;
            }
            if (--left === 0) {
                results.available = !err;
                cb(results);
                return;
            }
            setTimeout(ping, req.intervalMs);
        });
    }
    ping();
}

/*
 * The agent's pool for cns over a stretch of time: cueball's health
 * checks (GET /ping on each idle socket every pingInterval) and its
 * counters before and after. The stretch lasts until the sockets have
 * passed req.rounds checks each (that many times the sockets in all), or
 * req.ms at most: on a busy machine the timers run late.
 */
function health(req, cb) {
    var ok = 'health check ok, releasing';
    var pool = agent.getPool(cnsHost);
    var before = {stats: pool.getStats(), seen: JSON.parse(JSON.stringify(seen))};
    var want = req.rounds * before.stats.totalConnections;
    var started = Date.now();
    (function wait() {
        var passed = (seen[ok] || 0) - (before.seen[ok] || 0);
        if (passed < want && Date.now() - started < req.ms) {
            setTimeout(wait, 20);
            return;
        }
        cb({before: before, after: {stats: pool.getStats(), seen: seen}, state: pool.getState ? pool.getState() : undefined});
    })();
}

var ops = {
    getMachine: getMachine,
    createMachine: createMachine,
    listNetworks: listNetworks,
    getNetwork: getNetwork,
    dockerDNSSearch: dockerDNSSearch,
    dockerPing: dockerPing,
    health: health
};

var rl = readline.createInterface({input: process.stdin});
rl.on('line', function (line) {
    var req = JSON.parse(line);
    if (req.op === 'exit') {
        agent.stop(function () {
            dockerCNS.close();
            process.exit(0);
        });
        return;
    }
    var op = ops[req.op];
    if (!op) {
        emit({id: req.id, error: 'harness: unknown op ' + req.op});
        return;
    }
    op(req, function (res) {
        res.id = req.id;
        emit(res);
    });
});

/* Ready once the pool CloudAPI makes at start is running. */
var pool = agent.getPool(cnsHost);
function ready() {
    emit({event: 'ready', stats: pool.getStats()});
}
if (pool.isInState('running')) {
    ready();
} else {
    pool.on('stateChanged', function onState(st) {
        if (st === 'running') {
            pool.removeListener('stateChanged', onState);
            ready();
        }
    });
}
