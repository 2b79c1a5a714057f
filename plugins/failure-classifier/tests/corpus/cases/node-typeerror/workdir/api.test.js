const test = require('node:test');
const { client } = require('./api');
test('fetch', () => { client.fetch('/x'); });
