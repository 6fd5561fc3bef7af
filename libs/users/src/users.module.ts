import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GroupsModule } from '@ws/groups';
import { LoginLink } from './login-link.entity';
import { LoginLinksService } from './login-links.service';
import { SessionToken } from './session-token.entity';
import { SessionTokensService } from './session-tokens.service';
import { UserAttributes } from './user-attributes.entity';
import { UserEvent } from './user-events';
import { User } from './user.entity';
import { UsersService } from './users.service';

@Module({
  imports: [TypeOrmModule.forFeature([User, UserAttributes, SessionToken, LoginLink, UserEvent]), GroupsModule],
  providers: [UsersService, SessionTokensService, LoginLinksService],
  exports: [UsersService, SessionTokensService, LoginLinksService, GroupsModule],
})
export class UsersModule {}
