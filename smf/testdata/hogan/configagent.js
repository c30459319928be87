// configagent.js: a stand-in for config-agent's synchronous run
// (`agent.js -s`, sdc-config-agent lib/agent/agent.js), for the boot
// tests. It reads config-agent's etc/config.json as the real one does
// (sapi.url must be set; each localManifestDirs entry is searched for a
// sapi_manifests directory, each of whose subdirectories holds a
// manifest.json and a template), renders every manifest with hogan.js
// as renderConfigFile does (a copy of the metadata, with metadata.auto
// set to the instance's automatic values) and writes each file at its
// manifest's path, creating the directory. What it does not do: ask SAPI
// (the metadata and auto values come from the JSON file $CNS_TEST_SAPI,
// {"metadata": {...}, "auto": {...}}: the real agent reads the first
// from SAPI's /configs and derives the second from mdata-get), and run
// post_cmd (which at setup time finds no service to refresh).
//
// Paths are in the zone: they are read and written under $ZONE_ROOT.
// Run with NODE_PATH=<hogan install dir>/node_modules.
var fs = require('fs');
var path = require('path');
var hogan = require('hogan.js');

var root = process.env.ZONE_ROOT || '';
var sapi = JSON.parse(fs.readFileSync(process.env.CNS_TEST_SAPI, 'utf8'));
var config = JSON.parse(fs.readFileSync(
    root + '/opt/smartdc/config-agent/etc/config.json', 'utf8'));
if (!config.sapi || !config.sapi.url) {
	console.error('config-agent: no sapi.url in its config');
	process.exit(1);
}

(config.localManifestDirs || []).forEach(function (dir) {
	if (path.basename(dir) !== 'sapi_manifests')
		dir = path.join(dir, 'sapi_manifests');
	fs.readdirSync(root + dir).sort().forEach(function (name) {
		var mdir = path.join(root + dir, name);
		var manifest = JSON.parse(fs.readFileSync(
		    path.join(mdir, 'manifest.json'), 'utf8'));
		var template = fs.readFileSync(path.join(mdir, 'template'), 'utf8');
		var metadata = JSON.parse(JSON.stringify(sapi.metadata));
		metadata.auto = sapi.auto;
		var out = root + manifest.path;
		fs.mkdirSync(path.dirname(out), {recursive: true});
		fs.writeFileSync(out, hogan.compile(template).render(metadata));
		console.log('rendered ' + manifest.name + ' into ' + manifest.path);
	});
});
