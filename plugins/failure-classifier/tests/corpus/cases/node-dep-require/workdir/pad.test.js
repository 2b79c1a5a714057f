const test = require('node:test');
const { p } = require('./pad');
test('p', () => p('a'));
