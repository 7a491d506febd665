import { Body, Controller, Delete, Get, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProperty, ApiTags } from '@nestjs/swagger';
import { IsIn, IsString, Length } from 'class-validator';
import { CLOCK, type Clock } from '@assay/core';
import { API_ROLES, ApiTokenStore, type ApiRole } from '@assay/ledger';
import { Roles } from './access';
import { ASSAY_HOME_TOKEN } from './app.tokens';
import { Inject } from '@nestjs/common';

class CreateTokenDto {
  @ApiProperty({ enum: API_ROLES })
  @IsIn(API_ROLES as unknown as string[])
  role!: ApiRole;

  @ApiProperty({ description: '1-64 characters: letters, digits, space and . _ @ : -' })
  @IsString()
  @Length(1, 64)
  name!: string;
}

/** API tokens over HTTP (admin only): the same table `assay tokens` manages. A created token is in the answer only. */
@ApiTags('tokens')
@ApiBearerAuth()
@Controller('tokens')
export class TokensController {
  constructor(
    @Inject(ASSAY_HOME_TOKEN) private readonly home: string,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  private with<T>(fn: (s: ApiTokenStore) => T, create = false): T {
    const s = ApiTokenStore.open(this.home, { create });
    try {
      return fn(s);
    } finally {
      s.close();
    }
  }

  @Get()
  @Roles('admin')
  @ApiOperation({ summary: 'list the API tokens (ids, names, roles, times; never a token or its hash)' })
  list() {
    return { tokens: this.with((s) => s.list()) };
  }

  @Post()
  @Roles('admin')
  @ApiOperation({ summary: 'create a token of a role; the token is in this answer only' })
  create(@Body() body: CreateTokenDto) {
    const { path: _path, ...created } = this.with((s) => s.create({ role: body.role, name: body.name, clock: this.clock }), true);
    return created;
  }

  @Delete(':id')
  @Roles('admin')
  @ApiOperation({ summary: 'revoke a token: it stops working at the next request' })
  revoke(@Param('id') id: string) {
    return this.with((s) => s.revoke(id, this.clock));
  }
}
