// render.js TEMPLATE < METADATA: renders a SAPI template as config-agent's
// renderConfigFile does (lib/agent/agent.js): a copy of the instance's
// metadata, with metadata.auto set to the instance's automatic values,
// through hogan.compile(template).render(metadata). METADATA is a JSON
// array of metadata objects, each with the automatic values config-agent
// derives from the zone (ADMIN_IP...) under "auto", if the template reads
// any (INSTANCE_UUID is SAPI's); the output is a JSON array of the rendered
// files, in order (one node process renders them all). Run with
// NODE_PATH=<install dir>/node_modules.
var fs = require('fs');
var hogan = require('hogan.js');

var template = hogan.compile(fs.readFileSync(process.argv[2], 'utf8'));
var all = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(all.map(function (metadata) {
	var auto = metadata.auto || {};
	auto.INSTANCE_UUID = metadata.INSTANCE_UUID;
	metadata.auto = auto;
	return (template.render(metadata));
})));
