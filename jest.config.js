// Tiers: unit (pure code), e2e (real server process + real engine + official clients),
// deploy (manifests), containers (podman via testcontainers).
const ts = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
module.exports = {
  globalSetup: '<rootDir>/test/tmp-root.js',
  globalTeardown: '<rootDir>/test/tmp-root-teardown.js',
  projects: [
    { displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.spec.ts', '<rootDir>/test/deploy/**/*.spec.ts'], transform: ts, testEnvironment: 'node' },
    { displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'], transform: ts, testEnvironment: 'node', globalSetup: '<rootDir>/test/e2e/global-setup.js' },
    { displayName: 'containers', testMatch: ['<rootDir>/test/containers/**/*.e2e-spec.ts'], transform: ts, testEnvironment: 'node' },
  ],
};
