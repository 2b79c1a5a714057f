const test = require('node:test');
const cfg = require('./config.json');
test('cfg', () => {});
