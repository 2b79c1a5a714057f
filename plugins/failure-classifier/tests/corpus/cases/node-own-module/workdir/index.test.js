const test = require('node:test');
const { show } = require('./lib/index');
test('show', () => { show(1); });
