/** Version of the lab extension; tests/test_server.py checks it equals package.json and sdc_magic.__version__. */
export const VERSION = '0.1.0';
