module.exports = { testEnvironment: 'jsdom' };
