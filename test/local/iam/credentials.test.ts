// Each role session gets its own stable access key; the key names the caller.
import { ADMIN, CredentialDirectory } from '../../../local/iam/credentials';
import { LOCAL_CREDENTIALS } from '../../../local/servers';
import { ACCOUNT, roleArn } from './fixtures';

describe('Class: CredentialDirectory', () => {
  describe('Method: forRole', () => {
    it('issues an STS-style temporary key per role session, the same one every time and in every directory', () => {
      const a = new CredentialDirectory().forRole(roleArn('consumer'), 'consumer-fn');
      expect(a.accessKeyId).toMatch(/^ASIA[A-Z2-7]{16}$/);
      expect(new CredentialDirectory().forRole(roleArn('consumer'), 'consumer-fn')).toEqual(a);
      const other = new CredentialDirectory();
      expect(other.forRole(roleArn('consumer'), 'other-session').accessKeyId).not.toBe(a.accessKeyId);
      expect(other.forRole(roleArn('producer'), 'consumer-fn').accessKeyId).not.toBe(a.accessKeyId);
    });

    it('throws on a session name STS would refuse, and on an ARN that is no role', () => {
      const directory = new CredentialDirectory();
      expect(() => directory.forRole(roleArn('r'), 'has space')).toThrow(
        'session name "has space" is not valid for STS (2 to 64 of [A-Za-z0-9_+=,.@-])',
      );
      expect(() => directory.forRole('arn:aws:iam::000000000000:user/u', 'fn')).toThrow(
        'arn:aws:iam::000000000000:user/u is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)',
      );
    });
  });

  describe('Method: principalOf', () => {
    it('names the role session of a key it issued, the administrator for the local key, and nobody otherwise', () => {
      const directory = new CredentialDirectory();
      const { accessKeyId } = directory.forRole(`arn:aws:iam::${ACCOUNT}:role/service-role/consumer`, 'consumer-fn');
      expect(directory.principalOf(accessKeyId)).toEqual({
        kind: 'role',
        roleArn: `arn:aws:iam::${ACCOUNT}:role/service-role/consumer`,
        sessionName: 'consumer-fn',
        assumedRoleArn: `arn:aws:sts::${ACCOUNT}:assumed-role/consumer/consumer-fn`,
      });
      expect(directory.principalOf(LOCAL_CREDENTIALS.accessKeyId)).toBe(ADMIN);
      expect(directory.principalOf('ASIAAAAAAAAAAAAAAAAA')).toBeUndefined();
      // A key is known only to the directory that issued it.
      expect(new CredentialDirectory().principalOf(accessKeyId)).toBeUndefined();
    });
  });
});
