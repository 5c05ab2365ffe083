module.exports = require('./tmp-root').teardown;
