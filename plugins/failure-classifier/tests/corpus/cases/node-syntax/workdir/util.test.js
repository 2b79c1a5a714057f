const test = require('node:test');
const { f } = require('./util');
test('f', () => f(1));
