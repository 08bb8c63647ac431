/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { isolatedModules: true }],
  },
  testTimeout: 60000,
  setupFiles: ['<rootDir>/test/support/setupEnv.ts'],
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
};
