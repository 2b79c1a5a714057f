const test = require('node:test');
const { DatabaseSync } = require('node:sqlite');
test('db', () => { new DatabaseSync(':memory:'); });
